"""The platform failing sends under the real `orchestrator run`: 502s (JSON and a proxy's HTML
page), 500s and dropped connections on sendMessage, mixed between good answers; each reply
reaches the chat exactly once, none is lost. Bounded: 30 messages, about 10 s."""

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

MESSAGES = 30


@pytest.mark.timeout(180)
async def test_5xx_and_dropped_sends_deliver_each_reply_exactly_once(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.default = echo_model
    async with FakeTelegram() as tg:
        config = write_config(config_text(fake_llm, tg, daemon="reply_deadline_s = 60\n"))
        sent: list[str] = []
        # a fault now and then, between answered sends, for the whole run
        for round_ in range(8):
            tg.fail_next("sendMessage", status=502, after=1, html=round_ % 2 == 0)
            tg.drop_next("sendMessage")
            tg.fail_next("sendMessage", status=500, after=1, times=2)
        proc = await start(config)
        try:
            for n in range(MESSAGES):
                sent.append(f"msg-{n}")
                tg.push_message(100 + n % 5, 7, sent[-1])
                await asyncio.sleep(0.02)
            await tg.wait_for(lambda: settled(tg, sent), timeout=90)
            await asyncio.sleep(1.0)  # anything sent twice would arrive now
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                exit_code = await proc.wait()
    refused = [c for c in tg.requests if c.method == "sendMessage" and c.status != 200]
    tally = Tally.of(tg, sent)
    print(f"\n{tally.line('send faults')}; {len(refused)} sends failed and were retried")
    assert exit_code == 0
    assert len(refused) >= 30  # the faults were met
    assert (tally.lost, tally.duplicates, tally.both, tally.noticed) == (0, 0, 0, 0)
    assert tally.answered == MESSAGES
