"""What a person chatting on the terminal sees: the real `orchestrator run` on a pseudo-terminal.

The child's stdin and stdout (and stderr, unless a test redirects it) are the slave side of
`os.openpty()`; the test types into the master side and reads the screen from it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, paced, status, text
from tests.pty_screen import Pty

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def chat_toml(fake: FakeOpenAI) -> str:
    return (
        provider_toml(fake.base_url)
        + '[agents.helper]\nprovider = "fake"\nmodel = "m"\n'
        + '[channels.term]\nkind = "terminal"\nuser = "op"\n'
        + '[[routes]]\nchannel = "term"\nagent = "helper"\nsenders = ["op"]\n'
    )


@asynccontextmanager
async def on_a_terminal(
    config: Path, *args: str, stderr_pipe: bool = False
) -> AsyncIterator[tuple[Pty, asyncio.subprocess.Process]]:
    master, slave = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config), *args,
        stdin=slave, stdout=slave, stderr=asyncio.subprocess.PIPE if stderr_pipe else slave, cwd=ROOT,
    )
    os.close(slave)
    pty = Pty(master)
    try:
        yield pty, proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await proc.communicate()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        asyncio.get_running_loop().remove_reader(master)
        os.close(master)


async def test_a_person_gets_a_prompt_labelled_replies_and_no_info_lines_between_them(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(status(500), text("hi there"))
    async with on_a_terminal(write_config(chat_toml(fake_llm))) as (pty, _):
        await pty.wait_for("you> ")
        pty.type("hello")
        await pty.wait_for("the details in the log.\nyou> ")
        pty.type("again")
        shown = await pty.wait_for("bot> hi there\nyou> ")
    assert "INFO" not in shown and "ready: channels" not in shown
    # a warning still reaches the person: the incident the apology names
    [incident] = [line for line in shown.splitlines() if "WARNING" in line and "incident" in line]
    assert incident.split("incident ")[1][:6] in shown.split("bot> Sorry")[1]


async def test_verbose_shows_every_line_on_the_terminal(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    async with on_a_terminal(write_config(chat_toml(fake_llm)), "-v") as (pty, _):
        shown = await pty.wait_for("ready: channels term")
    assert "INFO" in shown


async def test_logs_sent_elsewhere_keep_their_level(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(text("hi there"))
    async with on_a_terminal(write_config(chat_toml(fake_llm)), stderr_pipe=True) as (pty, proc):
        await pty.wait_for("you> ")
        pty.type("hello")
        await pty.wait_for("bot> hi there\nyou> ")
        proc.send_signal(signal.SIGTERM)
        _, log = await asyncio.wait_for(proc.communicate(), 20)
    assert "ready: channels term" in log.decode()
    assert "INFO" not in pty.shown


def screen_lines(shown: str) -> list[str]:
    """Return the lines as a terminal shows them: each line from its last clear-line on."""
    return [line.rsplit("\r\x1b[K", 1)[-1].rsplit("\r", 1)[-1] for line in shown.split("\n")]


async def test_a_streamed_reply_is_printed_as_the_model_writes_it(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    answer = "First line of the answer.\n" + " ".join(f"w{i}" for i in range(30))
    fake_llm.script(paced(text(answer), over_s=2.0))
    async with on_a_terminal(write_config(chat_toml(fake_llm))) as (pty, _):
        await pty.wait_for("you> ")
        pty.type("hello")
        partial = await pty.wait_for("bot> First line")
        assert "w29" not in partial  # the start is on the screen before the model finished
        shown = await pty.wait_for("w29\nyou> ")
    lines = screen_lines(shown)
    start = lines.index("bot> First line of the answer.")
    assert lines[start + 1] == "     " + answer.split("\n")[1]  # the continuation aligned under the label
    assert lines[start + 2] == "you> "
    assert "\n".join(lines).count("w29") == 1  # the final text was not printed a second time


async def test_a_log_line_goes_above_the_prompt_and_the_half_typed_line_is_redrawn(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    # A WARNING printed while the person was typing landed on the prompt line, in the middle
    # of what they typed ("you> helERROR reload rejected ..."), and the typed text vanished.
    fake_llm.script(text("hi there"))
    path = write_config(chat_toml(fake_llm))
    async with on_a_terminal(path) as (pty, proc):
        await pty.wait_for("you> ")
        os.write(pty.master, b"hel")  # typed, Enter not pressed yet
        await pty.wait_for("you> hel")
        path.write_text(chat_toml(fake_llm) + "[agents.helper.budget]\nmax_tool_iterations = \"8\"\n", encoding="utf-8")
        proc.send_signal(signal.SIGHUP)  # a reload that fails logs one ERROR line
        await pty.wait_for("reload rejected")
        shown = await pty.wait_for("\nyou> hel")
        lines = screen_lines(shown)
        [log] = [i for i, line in enumerate(lines) if "reload rejected" in line]
        assert lines[log].startswith("ERROR")  # the log line has a line of its own ...
        assert lines[log + 1] == "you> hel"  # ... and the prompt with the typed text is drawn again below
        os.write(pty.master, b"\x7flo\n")  # Backspace, then the rest: the line the model gets is edited
        shown = await pty.wait_for("bot> hi there\nyou> ")
    assert fake_llm.requests[0]["messages"][-1]["content"] == "helo"
    assert "Traceback" not in shown


async def test_the_terminal_is_left_as_it_was_found(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    import termios

    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "run", "--config", str(write_config(chat_toml(fake_llm))),
        stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
    )
    pty = Pty(master)
    try:
        await pty.wait_for("you> ")
        during = termios.tcgetattr(slave)
        assert not during[3] & termios.ICANON and not during[3] & termios.ECHO  # the channel edits the line
        assert during[3] & termios.ISIG  # Ctrl-C is still SIGINT
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert termios.tcgetattr(slave) == before
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        asyncio.get_running_loop().remove_reader(master)
        os.close(master)
        os.close(slave)
