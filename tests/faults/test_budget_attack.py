"""Issue 32's budget attacks against the real `orchestrator run` and a fake Telegram.

1. One reply of 40,138 tokens was delivered under a 2,000-token turn budget: now the call
   asks for what the turn leaves, the fake stops there as the API does, and the turn passes
   its budget only by the input estimate's error (the reply says it was cut).
2. A cheap front agent spent without limit through an expensive delegate: now the
   delegate's tokens spend the caller's day with that sender, so the caller's next call is
   never made once the delegate has spent it.
"""

from __future__ import annotations

import signal
import sqlite3

import pytest

from orchestrator.checks import load_config
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, with_usage
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, start

pytestmark = pytest.mark.slow

LONG = "word " * 40_000


def _config(fake_llm: FakeOpenAI, tg: FakeTelegram) -> str:
    # `a` (user 7) has the budgets; `front` (user 8) is cheap and delegates to the costly `b`
    plain = config_text(fake_llm, tg).replace('format = "plain"\n', 'format = "plain"\nstream = false\n')
    plain = plain.replace('senders = ["*"]', 'senders = ["7"]')
    return plain + (
        "\n[agents.a.budget]\nmax_tokens_per_turn = 2000\nmax_tokens_per_day = 3000\n"
        '[agents.front]\nprovider = "fake"\nmodel = "front-model"\nautonomy = "full"\ntools = ["delegate"]\n'
        'delegates = ["b"]\n[agents.front.budget]\nmax_tokens_per_day = 3000\n'
        '[agents.b]\nprovider = "fake"\nmodel = "b-model"\n'
        '[[routes]]\nchannel = "tg"\nagent = "front"\nsenders = ["8"]\n'
    )


def _replies(tg: FakeTelegram, chat: int) -> list[str]:
    return [str(p["text"]) for p in tg.sent if p.get("chat_id") == chat]


@pytest.mark.timeout(120)
async def test_a_long_reply_and_a_costly_delegate_are_held_by_the_budgets_through_orchestrator_run(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        config = write_config(_config(fake_llm, tg))
        proc = await start(config)
        try:
            fake_llm.script(with_usage(text(LONG), prompt=138, completion=40_000))
            tg.push_message(100, 7, "write it all")
            await tg.wait_for(lambda: any("cut short" in t for t in _replies(tg, 100)), timeout=30)

            fake_llm.script(
                with_usage(tool_call("delegate", {"agent": "b", "task": "write it all"}), prompt=100, completion=10),
                with_usage(text(LONG), prompt=20, completion=40_000),
            )
            tg.push_message(200, 8, "have b write it")
            await tg.wait_for(lambda: any("Stopped" in t for t in _replies(tg, 200)), timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0

    # 1: asked for what the turn left, and passed it only by the input's under-estimate
    asked = fake_llm.requests[0]["max_tokens"]
    assert 0 < 2_000 - asked < 138
    reply = "".join(_replies(tg, 100))  # about 8,000 characters: two Telegram messages
    assert len(reply) < 4 * asked + 200
    assert reply.endswith(f"[cut short: the token budget left this answer {asked} tokens]")
    usage = load_config(config).state_path() / "usage.sqlite3"
    with sqlite3.connect(usage) as db:
        rows = db.execute("SELECT agent, sender, input_tokens + output_tokens, callers FROM usage ORDER BY id").fetchall()
    first = rows[0]
    assert first[:2] == ("a", "tg:7") and first[2] - 2_000 == 138 - (2_000 - asked)  # not 38,138

    # 2: b's call was bounded by front's day and charged to it; front's next call was never made
    assert [r["model"] for r in fake_llm.requests] == ["m", "front-model", "b-model"]
    b_asked = fake_llm.requests[2]["max_tokens"]
    assert 0 < 3_000 - 110 - b_asked < 20  # front's day left, less b's projected input
    assert [r[:2] + (r[3],) for r in rows[1:]] == [("front", "tg:8", ""), ("b", "tg:8", '["front"]')]
    assert rows[1][2] + rows[2][2] - 3_000 == 20 - (3_000 - 110 - b_asked)  # past front's day by b's estimate error
    (stopped,) = [t for t in _replies(tg, 200) if "Stopped" in t]
    assert "the daily token budget of 3000 tokens for 'front' is spent" in stopped
