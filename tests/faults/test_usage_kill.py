"""The real `orchestrator run` killed with SIGKILL right after a reply: the turn's usage rows were
already on disk (written before its transcript and its reply), so the daily token budget the next
start reads back still counts that turn; a crash never hands a sender a fresh day."""

from __future__ import annotations

import signal

import pytest

from orchestrator.checks import load_config
from orchestrator.store import read_usage
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text, with_usage
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, start

pytestmark = pytest.mark.slow

DAY_BUDGET = 50_050  # the first turn reports 50,100 tokens: the day is spent after it


def _config(fake_llm: FakeOpenAI, tg: FakeTelegram) -> str:
    # Unstreamed, so the one sendMessage is the turn's final reply.
    plain = config_text(fake_llm, tg).replace('format = "plain"\n', 'format = "plain"\nstream = false\n')
    return plain + f"\n[agents.a.budget]\nmax_tokens_per_day = {DAY_BUDGET}\n"


def _replied(tg: FakeTelegram, needle: str) -> bool:
    return any(needle in payload["text"] for payload in tg.sent)


@pytest.mark.timeout(120)
async def test_a_kill_right_after_the_reply_keeps_the_turns_usage_and_the_spent_day(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.default = None  # a second model call would be a 500, not a reply
    fake_llm.script(with_usage(text("first answer"), prompt=50_000, completion=100))
    async with FakeTelegram() as tg:
        config = write_config(_config(fake_llm, tg))
        proc = await start(config)
        tg.push_message(100, 7, "first")
        try:
            await tg.wait_for(lambda: _replied(tg, "first answer"), timeout=30)
        finally:
            proc.send_signal(signal.SIGKILL)  # within milliseconds of the reply: far less than a batch's wait
            await proc.wait()
        [row] = read_usage(load_config(config).state_path() / "usage.sqlite3")
        assert (row.calls, row.input_tokens, row.output_tokens) == (1, 50_000, 100)

        proc = await start(config)  # the restart reads the day back from the table
        try:
            tg.push_message(100, 7, "second")
            await tg.wait_for(lambda: _replied(tg, "daily token budget"), timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    [refusal] = [p["text"] for p in tg.sent if "daily token budget" in p["text"]]
    assert f"of {DAY_BUDGET} tokens for 'a' is spent (50100 used" in refusal
    assert len(fake_llm.requests) == 1  # the second turn never reached the model
