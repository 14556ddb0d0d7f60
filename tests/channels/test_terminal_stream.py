"""The terminal channel streams a reply on a tty: lines printed once, the last one redrawn."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from channels import ChannelEnded, Outbound
from channels.terminal import TerminalAdapter


class TtyScreen:
    """A stdout that says it is a terminal and keeps the screen as a terminal would show it."""

    def __init__(self) -> None:
        self.raw = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.raw += text
        return len(text)

    def flush(self) -> None:
        return None

    def lines(self) -> list[str]:
        # "\r\x1b[K" returns to the line's start and clears it: what follows replaces the line
        return [line.rsplit("\r\x1b[K", 1)[-1] for line in self.raw.split("\n")]


@asynccontextmanager
async def tty_adapter() -> AsyncIterator[tuple[TerminalAdapter, TtyScreen]]:
    master, slave = os.openpty()
    screen = TtyScreen()
    adapter = TerminalAdapter(
        name="term", user="op", chat="local", stdin=os.fdopen(slave, "rb", buffering=0), stdout=screen  # type: ignore[arg-type]
    )
    ready = asyncio.Event()

    async def nothing(_: object) -> None:
        return None

    task = asyncio.create_task(adapter.run(nothing, ready.set))
    try:
        await asyncio.wait_for(ready.wait(), 5)
        yield adapter, screen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        os.close(master)


async def test_the_tool_line_is_drawn_then_gone_and_the_answer_continues() -> None:
    async with tty_adapter() as (adapter, screen):
        stream = adapter.open_stream(Outbound(chat="local", text=""))
        assert stream is not None
        await stream.update("Let me look")
        await stream.update("Let me look\n\nrunning file_read...")
        await stream.update("Let me look")  # the tool finished
        await stream.update("It says hello")  # the next answer replaces the text before the tools
        await stream.finish("It says hello")
    lines = screen.lines()
    shown = [line for line in lines if line.strip() and line != "you> "]
    assert shown == ["bot> Let me look", "     It says hello"]
    assert not any("running file_read" in line for line in lines)
    assert lines[-1] == "you> "  # the prompt is back once the reply is complete


async def test_a_stopped_stream_keeps_its_text_and_says_so() -> None:
    async with tty_adapter() as (adapter, screen):
        stream = adapter.open_stream(Outbound(chat="local", text=""))
        assert stream is not None
        await stream.update("half an\nanswer and\n\nrunning shell...")
        await stream.abort("Stopped.")
    shown = [line for line in screen.lines() if line.strip() and line != "you> "]
    assert shown == ["bot> half an", "     answer and", "     Stopped."]


async def test_a_final_text_that_does_not_continue_the_screen_is_printed_whole() -> None:
    async with tty_adapter() as (adapter, screen):
        stream = adapter.open_stream(Outbound(chat="local", text=""))
        assert stream is not None
        await stream.update("Partial")
        await stream.finish("Sorry, the model provider failed (incident abc123).")
    shown = [line for line in screen.lines() if line.strip() and line != "you> "]
    assert shown == ["bot> Partial", "     Sorry, the model provider failed (incident abc123)."]


async def test_a_pipe_gets_no_stream() -> None:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as stdin:
        adapter = TerminalAdapter(name="term", user="op", chat="local", stdin=stdin)
        assert adapter.open_stream(Outbound(chat="local", text="")) is None  # final text once instead
    os.close(write_fd)


async def test_the_line_is_edited_by_the_channel_on_a_terminal() -> None:
    # Backspace, Ctrl-W (last word), Ctrl-U (whole line), arrow keys dropped, Ctrl-D ends input.
    master, slave = os.openpty()
    screen = TtyScreen()
    adapter = TerminalAdapter(
        name="term", user="op", chat="local", stdin=os.fdopen(slave, "rb", buffering=0), stdout=screen  # type: ignore[arg-type]
    )
    got: list[str] = []
    ready = asyncio.Event()

    async def deliver(message: object) -> None:
        got.append(getattr(message, "text"))

    task = asyncio.create_task(adapter.run(deliver, ready.set))
    try:
        await asyncio.wait_for(ready.wait(), 5)
        os.write(master, "héllo wrld\x7f\x7f\x7f\x7fworld\n".encode())
        os.write(master, b"foo bar\x17baz\n" + b"junk\x15ok\n" + b"\x1b[A\x1b[Dup\n")
        os.write(master, b"\x04")
        async with asyncio.timeout(10):
            while len(got) < 4:
                await asyncio.sleep(0.01)
        assert got == ["héllo world", "foo baz", "ok", "up"]
        # Ctrl-D ends the chat: the channel stops (the daemon decides whether it goes on)
        with pytest.raises(ChannelEnded):
            await asyncio.wait_for(asyncio.shield(task), 10)
        # a prompt is drawn again after each line, and the cursor leaves the last one at Ctrl-D
        assert screen.lines()[-2:] == ["you> ", ""]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        os.close(master)
