"""What the pty tests share: the terminal a person looks at, read from its master side."""

from __future__ import annotations

import asyncio
import os

__all__ = ["Pty"]


class Pty:
    """The terminal a person looks at: what the child wrote, and a keyboard."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.shown = ""
        self.changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed its side
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            return
        self.shown += data.decode(errors="replace").replace("\r\n", "\n")
        self.changed.set()

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    async def wait_for(self, wanted: str, timeout: float = 20.0) -> str:
        async with asyncio.timeout(timeout):
            while wanted not in self.shown:
                self.changed.clear()
                await self.changed.wait()
        return self.shown
