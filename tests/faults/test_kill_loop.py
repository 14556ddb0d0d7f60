"""The real `orchestrator run` killed with SIGKILL at random moments while replies are slow to
send: every message a user sent gets an answer or an "interrupted" notice (never neither, never
both), and nothing is sent twice except what no client can rule out: a send the platform took
while the process that sent it was killed before it could record it. So a copy is allowed
only from a later process than the one that sent the first, and only when that one was killed
(never within one process, never across a clean stop). Bounded: a fixed seed, 8 kills, about
30 s."""

from __future__ import annotations

import asyncio
import random
import signal
import time

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, outcome, outcomes, settled, start

pytestmark = pytest.mark.slow

KILLS = 8
PER_ROUND = 6


@pytest.mark.timeout(240)
async def test_kill_nine_in_a_loop_loses_nothing_and_answers_nothing_twice(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    rng = random.Random(20261201)
    fake_llm.default = echo_model
    fake_llm.latency_s = 0.05
    async with FakeTelegram() as tg:
        tg.slow_next("sendMessage", 0.2, times=100_000)
        config = write_config(config_text(fake_llm, tg))
        sent: list[str] = []
        # (start, end, killed) of each daemon process, in the fake's clock
        lives: list[tuple[float, float, bool]] = []
        for _ in range(KILLS):
            began = time.monotonic()
            proc = await start(config)
            for _ in range(PER_ROUND):
                text = f"msg-{len(sent)}"
                sent.append(text)
                tg.push_message(100 + len(sent) % 4, 7, text)
                await asyncio.sleep(rng.uniform(0.0, 0.15))
            await asyncio.sleep(rng.uniform(0.0, 0.6))
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            lives.append((began, time.monotonic(), True))
        began = time.monotonic()
        proc = await start(config)  # the last start finishes what the kills left
        try:
            await tg.wait_for(lambda: settled(tg, sent), timeout=90)
            await asyncio.sleep(1.0)  # anything sent twice would arrive now
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            lives.append((began, time.monotonic(), False))
    seen = outcomes(tg)
    answered = [t for t in sent if seen[t]]
    noticed = [t for t in sent if seen[f"notice {t}"]]
    both = [t for t in sent if seen[t] and seen[f"notice {t}"]]
    lost = [t for t in sent if not seen[t] and not seen[f"notice {t}"]]
    # Every copy after the first must come from a later process than the first copy's, and
    # the first copy's process must have been killed (a copy within one life, or after a
    # clean stop, is a bug).
    def life(at: float) -> int:
        return next(i for i, (start_at, end_at, _) in enumerate(lives) if start_at <= at <= end_at)

    first: dict[str, int] = {}
    unexplained: list[str] = []
    twice = 0
    for call in (c for c in tg.requests if c.method == "sendMessage" and c.status == 200):
        key = outcome(call.payload["text"])
        if key is None:
            continue
        if key not in first:
            first[key] = life(call.at)
            continue
        twice += 1
        if not (life(call.at) > first[key] and lives[first[key]][2]):
            unexplained.append(key)
    print(f"kill loop: {len(sent)} messages, {len(answered)} answered, {len(noticed)} noticed, "
          f"{twice} sent again after a kill, {len(lost)} lost")
    assert (lost, both, unexplained) == ([], [], [])
