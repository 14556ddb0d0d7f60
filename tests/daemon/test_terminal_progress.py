"""What the terminal shows while a tool call waits for approval, and at the end of its input."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.daemon.test_terminal_screen import chat_toml, on_a_terminal, screen_lines
from tests.fakes.openai_server import FakeOpenAI, paced, text, tool_call
from tests.pty_screen import Pty

pytestmark = pytest.mark.slow


async def shows(pty: Pty, wanted: str) -> str:
    """Wait until the screen shows `wanted`; on a timeout, fail showing the screen."""
    try:
        return await pty.wait_for(wanted)
    except TimeoutError:
        raise AssertionError(f"never shown: {wanted!r}; the screen:\n{pty.shown}") from None


def supervised_toml(fake: FakeOpenAI) -> str:
    return (
        provider_toml(fake.base_url)
        + '[agents.helper]\nprovider = "fake"\nmodel = "m"\nautonomy = "supervised"\ntools = ["file_write"]\n'
        + '[channels.term]\nkind = "terminal"\nuser = "op"\n'
        + '[[routes]]\nchannel = "term"\nagent = "helper"\nsenders = ["op"]\n'
    )


async def test_a_call_waiting_for_approval_is_shown_as_waiting_not_running(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        paced(tool_call("file_write", {"path": "a.txt", "content": "x"}, content="Writing it."), over_s=0.2),
        text("wrote a.txt"),
    )
    async with on_a_terminal(write_config(supervised_toml(fake_llm))) as (pty, _):
        await pty.wait_for("you> ")
        pty.type("write a.txt")
        await shows(pty, "waiting for approval of file_write...")
        shown = await shows(pty, "[approval ")
        assert "running file_write" not in shown  # not before a person said yes
        request = shown.split("[approval ", 1)[1].split("]", 1)[0]
        pty.type(f"/approve {request}")
        shown = await shows(pty, "wrote a.txt")
    assert not any("waiting for approval" in line for line in screen_lines(shown)[-3:])  # the line went


async def test_ctrl_d_ends_the_chat_and_stops_a_daemon_with_nothing_else_to_serve(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with on_a_terminal(write_config(chat_toml(fake_llm))) as (pty, proc):
        await pty.wait_for("you> ")
        os.write(pty.master, b"\x04")  # Ctrl-D on an empty line
        async with asyncio.timeout(30):
            assert await proc.wait() == 0
    assert "chat term ended (Ctrl-D) and nothing else serves: stopping" in pty.shown


async def test_ctrl_d_with_another_channel_serving_says_how_to_stop(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    config = write_config(chat_toml(fake_llm) + "[gateway]\nport = 0\n")
    async with on_a_terminal(config) as (pty, proc):
        await pty.wait_for("you> ")
        os.write(pty.master, b"\x04")
        await pty.wait_for("chat term ended (Ctrl-D); still serving the gateway: Ctrl-C (or SIGTERM) stops the daemon")
        assert proc.returncode is None  # still up: the gateway serves
