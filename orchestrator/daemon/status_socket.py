"""The status socket: `orchestrator status` asks the running daemon for its status document.

The server half (the client, stdlib only, is `orchestrator/status_client.py`). A unix stream
socket, `run/status.sock` in the state dir: the folder 0700 and the socket
0600, so only the daemon's own user reaches it. The exchange is one line each way: the
client sends `status`, the daemon answers the document as one JSON line and closes. The
request is bounded (`MAX_REQUEST` bytes, `_REQUEST_TIMEOUT_S`), and connections are
answered one at a time by one task in the runtime's TaskGroup.

Served with `asyncio` sockets rather than aiohttp's `UnixSite`: aiohttp is imported only
when `[gateway]` is configured, and one line needs no HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from loguru import logger

from orchestrator.daemon.runtime import Runtime
from orchestrator.private import private_dir
from orchestrator.status_client import MAX_REQUEST, REQUEST, addressable, status_socket_path

__all__ = ["serve_status_socket"]

_REQUEST_TIMEOUT_S: Final = 2.0


@asynccontextmanager
async def serve_status_socket(runtime: Runtime) -> AsyncIterator[Path]:
    """Answer status requests on the state dir's socket while the context is open.

    Any socket file already there is a previous daemon's (the caller holds the state
    lock): it is replaced. The socket file is removed on exit.
    """
    path = status_socket_path(runtime.config.state_path())
    private_dir(path.parent)
    os.chmod(path.parent, 0o700)  # ours alone: a folder left wider by hand is closed again
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with addressable(path) as address:
            listener.bind(address)
        os.chmod(path, 0o600)  # unreachable meanwhile: the folder is 0700
        listener.listen(16)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    task = runtime.spawn(_answer_each(runtime, listener), name="status-socket")
    try:
        yield path
    finally:
        task.cancel()
        await asyncio.wait([task])
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def _answer_each(runtime: Runtime, listener: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    while True:
        connection, _ = await loop.sock_accept(listener)
        with connection:
            connection.setblocking(False)
            try:
                async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                    await _answer(runtime, connection, loop)
            except (TimeoutError, OSError) as exc:
                logger.debug("status socket: a request was dropped ({})", type(exc).__name__)
            except Exception as exc:  # one bad answer must not end the socket
                logger.opt(exception=exc).warning("status socket: the status document could not be built")


async def _answer(runtime: Runtime, connection: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    request = b""
    while b"\n" not in request and len(request) <= MAX_REQUEST:
        chunk = await loop.sock_recv(connection, MAX_REQUEST + 1)
        if not chunk:
            break
        request += chunk
    if request != REQUEST:
        answer: dict[str, Any] = {"error": "bad_request", "detail": "send one line: status"}
    else:
        answer = runtime.status_document()
    await loop.sock_sendall(connection, json.dumps(answer).encode() + b"\n")
