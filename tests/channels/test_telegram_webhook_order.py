"""Telegram webhook mode under parallel delivery (up to 40 connections, as Telegram sends):
one chat's messages are answered in the order sent, different chats run side by side."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "444444:DDD-webhook-bot"
SECRET = "hook-Secret_42"
CHATS = (41, 42, 43)
PER_CHAT = 5


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_HOOK", TOKEN)
    monkeypatch.setenv("TG_HOOK_SECRET", SECRET)
    async with FakeTelegram(token=TOKEN, username="hook_bot") as fake:
        yield fake


async def test_parallel_webhook_deliveries_keep_each_chats_order(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, unused_tcp_port: int
) -> None:
    fake_llm.default = echo_model
    fake_llm.latency_s = 0.05  # turns take a moment, so chats overlap
    tg.parallel_webhooks(40)
    path = write_config(_config(fake_llm, tg, unused_tcp_port))
    async with daemon(path) as runtime:
        for n in range(PER_CHAT):  # interleaved, as several users typing at once
            for chat in CHATS:
                tg.push_message(chat, chat, f"{chat}#{n}")
        await tg.wait_for(lambda: len(tg.sent) == len(CHATS) * PER_CHAT, timeout=30)
        await runtime.drain(10)
    answers = [(m["chat_id"], m["text"]) for m in tg.sent]
    order = [int(chat) for chat, _text in answers]
    print(f"\nwebhook POSTs in flight at most: {tg.webhook_peak}; answer order by chat: {order}")
    for chat in CHATS:
        mine = [t for c, t in answers if int(c) == chat]
        assert mine == [f"m: {chat}#{n}" for n in range(PER_CHAT)]  # the order sent
    assert tg.webhook_peak >= 2  # chats were delivered concurrently
    # ...and answered side by side: no chat waited for another chat's whole burst
    assert order != sorted(order, key=CHATS.index)
    assert all(200 <= status < 300 for _update, status in tg.webhook_attempts)


async def test_one_webhook_connection_keeps_order_even_when_telegram_would_not(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, unused_tcp_port: int
) -> None:
    fake_llm.default = echo_model
    tg.parallel_webhooks(40, chats_in_order=False)  # one chat's updates may travel side by side
    path = write_config(_config(fake_llm, tg, unused_tcp_port, extra="webhook_max_connections = 1\n"))
    async with daemon(path) as runtime:
        await tg.wait_for(lambda: tg.webhook() is not None, timeout=10)
        assert int(tg.webhook()["max_connections"]) == 1  # type: ignore[index]
        for n in range(PER_CHAT * 2):
            tg.push_message(41, 41, f"41#{n}")
        await tg.wait_for(lambda: len(tg.sent) == PER_CHAT * 2, timeout=30)
        await runtime.drain(10)
    assert [m["text"] for m in tg.sent] == [f"m: 41#{n}" for n in range(PER_CHAT * 2)]
    assert tg.webhook_peak == 1


def _config(fake_llm: FakeOpenAI, tg: FakeTelegram, port: int, *, extra: str = "") -> str:
    return provider_toml(fake_llm.base_url) + f"""
[agents.a]
provider = "fake"
model = "m"

[channels.hook]
kind = "telegram"
token = "env:TG_HOOK"
api_base_url = "{tg.api_base_url}"
mode = "webhook"
webhook_url = "http://127.0.0.1:{port}/tg/hook"
webhook_listen = "127.0.0.1"
webhook_port = {port}
webhook_secret = "env:TG_HOOK_SECRET"
format = "plain"
{extra}
[[routes]]
channel = "hook"
agent = "a"
senders = ["*"]
"""
