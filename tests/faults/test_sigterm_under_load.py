"""SIGTERM while the real `orchestrator run` is busy (turns running, replies slow to send): the
drain answers what it accepted, the process exits 0, and a restart finishes the rest; every
message gets exactly one answer or one "interrupted" notice, and nothing reaches the chat twice
(a clean stop leaves no send to doubt). Bounded: 36 messages, two SIGTERMs, about 15 s."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import Tally, config_text, settled, start

pytestmark = pytest.mark.slow

MESSAGES = 36
CHATS = 6


@pytest.mark.timeout(180)
async def test_sigterm_under_load_answers_each_message_once_and_exits_0(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.default = echo_model
    fake_llm.latency_s = 0.1
    async with FakeTelegram() as tg:
        tg.slow_next("sendMessage", 0.2, times=100_000)
        config = write_config(config_text(fake_llm, tg))
        sent: list[str] = []
        proc = await start(config)
        for n in range(MESSAGES // 2):
            sent.append(f"msg-{n}")
            tg.push_message(100 + n % CHATS, 7, sent[-1])
        await tg.wait_for(lambda: tg.inflight("sendMessage") >= 1, timeout=20)  # replies on the wire
        for n in range(MESSAGES // 2, MESSAGES):  # more arrive as the signal does
            sent.append(f"msg-{n}")
            tg.push_message(100 + n % CHATS, 7, sent[-1])
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            first_exit = await proc.wait()
        drained = Tally.of(tg, sent)
        proc = await start(config)  # takes what the first never fetched, tells what it cut short
        try:
            await tg.wait_for(lambda: settled(tg, sent), timeout=60)
            await asyncio.sleep(1.0)  # anything sent twice would arrive now
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                second_exit = await proc.wait()
    tally = Tally.of(tg, sent)
    print(f"\nSIGTERM under load: the draining process answered {drained.answered} before it exited")
    print(tally.line("SIGTERM under load, after the restart"))
    assert (first_exit, second_exit) == (0, 0)
    assert (tally.lost, tally.duplicates, tally.both) == (0, 0, 0)
    assert tally.answered + tally.noticed == MESSAGES
