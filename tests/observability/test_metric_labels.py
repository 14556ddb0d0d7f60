"""No `/metrics` label carries a chat, sender or session id: a real `orchestrator run` scraped while
several Telegram senders' turns run and wait, and after; queues show as a maximum and a distribution."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest

from orchestrator.gateway import GatewayAddress
from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.faults.kit import ROOT, config_text
from tests.observability.kit import SCRAPE, TOKEN, gateway_port, samples, scrape

pytestmark = pytest.mark.slow

GATEWAY = """
[gateway]
port = 0
token = "file:gateway.token"
metrics_token = "file:scrape.token"
metrics = true
"""
# Private chats: each sender's chat id is their user id; one group chat with two of them.
SENDERS = (7310061, 7324172, 7338283)
GROUP = -1007355
MESSAGES = 2


@pytest.mark.timeout(120)
async def test_no_metric_label_names_a_chat_a_sender_or_a_session(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    fake_llm.default = echo_model
    fake_llm.latency_s = 0.3
    async with FakeTelegram() as tg:
        config = write_config(config_text(fake_llm, tg) + GATEWAY)
        (config.parent / "gateway.token").write_text(TOKEN + "\n", encoding="utf-8")
        (config.parent / "scrape.token").write_text(SCRAPE + "\n", encoding="utf-8")
        log = config.with_name(f"daemon-{time.monotonic_ns()}.log")
        with open(log, "wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=sink,
                cwd=ROOT, env={**os.environ, "FAULT_TG_TOKEN": DEFAULT_TOKEN},
            )
        scrapes: list[str] = []
        try:
            async with asyncio.timeout(60):
                while b"ready:" not in log.read_bytes():
                    assert proc.returncode is None, log.read_text()[-2000:]
                    await asyncio.sleep(0.05)
            address = GatewayAddress(host="127.0.0.1", port=gateway_port(log.read_text()))
            for n in range(MESSAGES):
                for sender in SENDERS:
                    tg.push_message(sender, sender, f"msg-{sender}-{n}")
                tg.push_message(GROUP, SENDERS[0], f"group-{n}")
            async with asyncio.timeout(60):  # turns run and wait: the queue gauges have something to show
                while not (_queued(body := (await scrape(address))[2]) or "tg:" in body):
                    await asyncio.sleep(0.02)
            scrapes.append(body)
            await tg.wait_for(lambda: len(tg.sent) >= MESSAGES * (len(SENDERS) + 1), timeout=60)
            scrapes.append((await scrape(address))[2])
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                assert await proc.wait() == 0, log.read_text()[-2000:]
    ids = [str(i) for i in (*SENDERS, GROUP, abs(GROUP))]
    for body in scrapes:
        found = samples(body)
        labels = {value for (_, pairs) in found for _, value in pairs}
        assert not [value for value in labels if any(i in value for i in ids)]
        assert not [value for value in labels if value.startswith("tg:")]  # no session key either
    busy, done = (samples(body) for body in scrapes)
    by_length = {dict(pairs)["waiting"]: v for (name, pairs), v in busy.items() if name == "orchestrator_sessions_by_queue_length"}
    assert set(by_length) == {"0", "1", "2-4", "5-9", "10+"} and sum(by_length[k] for k in ("1", "2-4")) >= 1
    completed = frozenset({("agent", "a"), ("channel", "tg"), ("path", "channel"), ("stop", "completed")})
    assert done[("orchestrator_turns_total", completed)] == MESSAGES * (len(SENDERS) + 1)
    assert done[("orchestrator_session_queue_length_max", frozenset())] == 0


def _queued(body: str) -> bool:
    return (samples(body).get(("orchestrator_session_queue_length_max", frozenset())) or 0) >= 1

