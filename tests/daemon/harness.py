"""A running Runtime with terminal adapters on pipes: type lines in, read replies out."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from channels.terminal import TerminalAdapter
from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.daemon import Runtime, replay_unfinished, start_channel


class Screen:
    """A stdout stand-in collecting what the adapter prints."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.lines.extend(text.rstrip("\n").split("\n"))
        self.changed.set()
        return len(text)

    def flush(self) -> None:
        return None

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> list[str]:
        async with asyncio.timeout(timeout):
            while not predicate(self.lines):
                self.changed.clear()
                await self.changed.wait()
        return self.lines


@dataclass
class Terminal:
    """One terminal channel on a pipe."""

    name: str
    adapter: TerminalAdapter
    writer: IO[bytes]
    screen: Screen = field(default_factory=Screen)

    def type(self, line: str) -> None:
        self.writer.write(line.encode() + b"\n")
        self.writer.flush()


@asynccontextmanager
async def running(config_path: Path, *, user: str = "local") -> AsyncIterator[tuple[Runtime, dict[str, Terminal]]]:
    """Open a Runtime on the config and start every terminal channel on its own pipe."""
    config: Config = load_config(config_path)
    async with Runtime.open(config, config_path=config_path) as runtime:
        unfinished = runtime.store.unfinished()
        terminals: dict[str, Terminal] = {}
        for name, settings in config.channels.items():
            read_fd, write_fd = os.pipe()
            screen = Screen()
            adapter = TerminalAdapter(
                name=name, user=settings.user, chat=settings.chat,
                stdin=os.fdopen(read_fd, "rb", buffering=0), stdout=screen,  # type: ignore[arg-type]
            )
            terminals[name] = Terminal(name=name, adapter=adapter, writer=os.fdopen(write_fd, "wb"), screen=screen)
            await asyncio.wait_for(start_channel(runtime, name, settings, adapter=adapter), 10)
        await replay_unfinished(runtime, unfinished)
        await asyncio.wait_for(runtime.mcp_settled.wait(), 30)  # the daemon serves meanwhile; tests wait
        try:
            yield runtime, terminals
        finally:
            for terminal in terminals.values():
                terminal.writer.close()
