"""A SIGHUP that restarts a channel while a turn runs: the turn goes on through the new adapter.

The turn's approval prompt, its typing indicator and its reply all look the channel's adapter
up when they use it, so the restarted channel carries them; the old adapter is closed and
nothing of the turn keeps using it (before, the prompt went through the closed adapter, which
opened an HTTP session nobody closed).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, paced, text, tool_call
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import start, stderr_of

pytestmark = pytest.mark.slow


def _config(fake_llm: FakeOpenAI, tg: FakeTelegram, *, typing_after_s: float) -> str:
    return provider_toml(fake_llm.base_url) + f"""
[daemon]
shutdown_grace_s = 20

[agents.ops]
provider = "fake"
model = "m"
autonomy = "supervised"
tools = ["file_write"]

[channels.tg]
kind = "telegram"
token = "env:FAULT_TG_TOKEN"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1
format = "plain"
typing_after_s = {typing_after_s}

[[routes]]
channel = "tg"
agent = "ops"
senders = ["*"]
reply_in_groups = "all"  # the group message here is not addressed to the bot: the handover is tested, not the gate
"""


@asynccontextmanager
async def _daemon(path: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run `orchestrator run` on `path` for the block, which ends it with SIGTERM (exit 0 expected)."""
    proc = await start(path)
    try:
        yield proc
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _wait_log(proc: asyncio.subprocess.Process, fragment: str) -> None:
    async with asyncio.timeout(20):
        while fragment not in stderr_of(proc):
            assert proc.returncode is None, stderr_of(proc)[-2000:]
            await asyncio.sleep(0.05)


@pytest.mark.timeout(90)
async def test_a_channel_restarted_mid_turn_carries_its_approval_and_reply(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        path = write_config(_config(fake_llm, tg, typing_after_s=0.5))
        async with _daemon(path) as proc:
            # The model thinks for 4 s; the channel restarts meanwhile, then it asks for a tool.
            fake_llm.latency_s = 4.0
            fake_llm.script(tool_call("file_write", {"path": "note.txt", "content": "x"}), text("written"))
            tg.push_message(10, 10, "please write a note")
            await tg.wait_for(lambda: len(fake_llm.requests) >= 1, timeout=20)
            fake_llm.latency_s = 0.0  # the next request, after the restart, answers at once

            path.write_text(_config(fake_llm, tg, typing_after_s=0.2))  # a changed channel: restart it
            proc.send_signal(signal.SIGHUP)
            await _wait_log(proc, "channel tg started after reload")

            prompts = lambda: [p for p in tg.calls("sendMessage") if "reply_markup" in p]  # noqa: E731
            await tg.wait_for(lambda: len(prompts()) == 1, timeout=20)
            assert "file_write" in prompts()[0]["text"]
            tg.press_button(10, "Approve")
            await tg.wait_for(lambda: any(p["text"] == "written" for p in tg.sent), timeout=20)
        log = stderr_of(proc)
        assert [p["text"] for p in tg.sent].count("written") == 1
        assert "Unclosed client session" not in log and "Unclosed connector" not in log
        assert "not connected" not in log and "Traceback" not in log


@pytest.mark.timeout(120)
async def test_a_sighup_mid_stream_ends_the_streamed_group_message_as_the_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    answer = " ".join(f"word{i}" for i in range(40)) + "."
    async with FakeTelegram() as tg:
        path = write_config(_config(fake_llm, tg, typing_after_s=0.5))
        async with _daemon(path) as proc:
            fake_llm.script(paced(text(answer), over_s=5.0))
            tg.push_message(-100, 10, "write slowly", chat_type="group")
            await tg.wait_for(lambda: any(v.kind == "edit" for v in tg.visible), timeout=30)
            path.write_text(_config(fake_llm, tg, typing_after_s=0.2))  # a changed channel: restart it
            proc.send_signal(signal.SIGHUP)
            await _wait_log(proc, "channel tg started after reload")
            await tg.wait_for(lambda: answer in tg.shown(-100), timeout=30)
        log = stderr_of(proc)
        assert tg.shown(-100) == [answer]  # the streamed message became the answer, no copy beside it
        assert [v.kind for v in tg.visible].count("send") == 1
        assert "the old adapter closes once the replies streaming through it end" in log
        assert "Unclosed client session" not in log and "Unclosed connector" not in log and "Traceback" not in log
        assert tg.rate_limited == 0
