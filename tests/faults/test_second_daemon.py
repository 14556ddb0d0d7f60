"""A second `orchestrator run` on the state dir of a busy one: it exits 1 with one line naming
the holder's pid, touches nothing, and the first keeps answering; nothing is answered twice and
no user is told a running turn was interrupted. Bounded: 24 messages, about 10 s."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import Tally, config_text, settled, start, stderr_of

pytestmark = pytest.mark.slow

MESSAGES = 24


@pytest.mark.timeout(180)
async def test_a_second_daemon_exits_1_naming_the_first_which_keeps_answering(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.default = echo_model
    fake_llm.latency_s = 0.05
    async with FakeTelegram() as tg:
        tg.slow_next("sendMessage", 0.2, times=100_000)
        config = write_config(config_text(fake_llm, tg))
        sent: list[str] = []
        first = await start(config)
        try:
            for n in range(MESSAGES // 2):
                sent.append(f"msg-{n}")
                tg.push_message(100 + n % 4, 7, sent[-1])
            await tg.wait_for(lambda: tg.inflight("sendMessage") >= 1, timeout=20)  # live inbox rows
            second = await start(config, wait_ready=False)
            async with asyncio.timeout(60):
                second_exit = await second.wait()
            for n in range(MESSAGES // 2, MESSAGES):  # the first still serves
                sent.append(f"msg-{n}")
                tg.push_message(100 + n % 4, 7, sent[-1])
            await tg.wait_for(lambda: settled(tg, sent), timeout=60)
            await asyncio.sleep(1.0)  # anything sent twice would arrive now
            assert first.returncode is None
        finally:
            first.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                first_exit = await first.wait()
    tally = Tally.of(tg, sent)
    print(f"\n{tally.line('second daemon')}")
    lines = stderr_of(second).splitlines()
    assert second_exit == 1
    assert len(lines) == 1 and lines[0].startswith(f"error: another orchestrator daemon (pid {first.pid}) is running on ")
    assert first_exit == 0
    assert (tally.lost, tally.duplicates, tally.both, tally.noticed) == (0, 0, 0, 0)
