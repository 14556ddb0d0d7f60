"""The ACP server's stdin/stdout streams, whatever stdin and stdout are.

The ACP library's own `stdio_streams` only takes pipes, sockets and terminals; a client (or
a shell) that points stdout at a regular file, or stdin at a file or /dev/null, crashed it
with "Pipe transport is only for pipes, sockets and character devices". Here a file on stdin
is read whole, and a file on stdout is written synchronously (a local file never blocks the
loop for long; a pipe keeps asyncio's flow control).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import IO, Any

__all__ = ["open_stdio"]


async def open_stdio(*, limit: int, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None
                     ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Return a reader of stdin and a writer to stdout for the protocol."""
    loop = asyncio.get_running_loop()
    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    reader = asyncio.StreamReader(limit=limit)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    except (ValueError, OSError):  # a regular file or /dev/null: all there is to read, now
        reader.feed_data(source.read())
        reader.feed_eof()
    protocol = _Flow(loop)
    transport: asyncio.WriteTransport
    try:
        transport, _ = await loop.connect_write_pipe(lambda: protocol, sink)
    except (ValueError, OSError):  # a regular file: plain blocking writes
        transport = _FileTransport(sink.fileno())
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class _Flow(asyncio.BaseProtocol):
    """Write-side flow control: `drain()` waits while the pipe's buffer is full."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._resumed: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    async def _drain_helper(self) -> None:  # what StreamWriter.drain() awaits
        if self._resumed is not None:
            await self._resumed


class _FileTransport(asyncio.WriteTransport):
    """Writes each frame to a regular file at once."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def abort(self) -> None:
        self._closing = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
