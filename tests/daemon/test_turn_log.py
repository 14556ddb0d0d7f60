"""The daemon's one line per turn: what answered it, without the message text."""

from __future__ import annotations

import io
import socket
from collections.abc import AsyncIterator

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "555555:EEE-log-bot"


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_LOG", TOKEN)
    async with FakeTelegram(token=TOKEN, username="log_bot") as fake:
        yield fake


def refused_url() -> str:
    with socket.socket() as probe:  # bound, then released: connecting is refused
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def config(tg: FakeTelegram, fake_llm: FakeOpenAI, primary: str) -> str:
    return f"""
[providers.hosted]
base_url = "{primary}"
max_retries = 0

[providers.local]
base_url = "{fake_llm.base_url}"
max_retries = 0

[agents.a]
provider = "hosted"
model = "big"
fallback = [{{ provider = "local", model = "small" }}]

[channels.tg]
kind = "telegram"
token = "env:TG_LOG"
api_base_url = "{tg.api_base_url}"
format = "plain"

[[routes]]
channel = "tg"
agent = "a"
senders = ["*"]
"""


async def test_a_turn_answered_by_a_fallback_says_so_in_its_log_line(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    fake_llm.script(text("from the fallback"))
    async with daemon(write_config(config(tg, fake_llm, refused_url()))):
        tg.push_message(7, 7, "the private question")
        await tg.wait_for(lambda: any(c.get("text") == "from the fallback" for c in tg.calls("sendMessage")))
    [line] = [line for line in debug_log.getvalue().splitlines() if "turn tg:7 from 7 by a" in line]
    assert "completed (answered by fallback local/small)" in line
    assert "private question" not in line


async def test_a_turn_its_own_provider_answered_names_no_fallback(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    fake_llm.script(text("from the primary"))
    async with daemon(write_config(config(tg, fake_llm, fake_llm.base_url))):
        tg.push_message(8, 8, "hello")
        await tg.wait_for(lambda: any(c.get("text") == "from the primary" for c in tg.calls("sendMessage")))
    [line] = [line for line in debug_log.getvalue().splitlines() if "turn tg:8 from 8 by a" in line]
    assert "fallback" not in line and "completed" in line
