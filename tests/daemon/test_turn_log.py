"""The daemon's one line per turn: what answered it, without the message text."""

from __future__ import annotations

import io
import socket
from collections.abc import AsyncIterator

import pytest

from tests.conftest import WriteConfig, priced_claude_toml
from tests.daemon.platforms import daemon
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, text, with_usage
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

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


async def test_the_log_line_carries_the_turns_tokens_and_no_cost_without_prices(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    fake_llm.script(with_usage(text("counted"), prompt=1200, completion=30, cached=1000))
    async with daemon(write_config(config(tg, fake_llm, fake_llm.base_url))):
        tg.push_message(9, 9, "hello")
        await tg.wait_for(lambda: any(c.get("text") == "counted" for c in tg.calls("sendMessage")), timeout=30)
    [line] = [line for line in debug_log.getvalue().splitlines() if "turn tg:9 from 9 by a" in line]
    assert "completed in " in line and ", tokens 1200 in (1000 cached) + 30 out, tools run: none" in line
    assert "cost" not in line


async def test_the_log_line_shows_anthropic_cache_writes_and_the_priced_cost(
    write_config: WriteConfig, tg: FakeTelegram, debug_log: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOG_CLAUDE_KEY", "sk-ant-log-key")
    async with FakeAnthropic(api_key="sk-ant-log-key", default=None, min_cacheable_tokens=1) as claude:
        claude.script(anthropic_api.text("cold"))
        toml = f"""
{priced_claude_toml(claude.base_url, "LOG_CLAUDE_KEY")}

[agents.a]
provider = "claude"
model = "claude-x"
system_prompt = "{"Answer briefly. " * 200}"

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
        async with daemon(write_config(toml)):
            tg.push_message(10, 10, "hello")
            await tg.wait_for(lambda: any(c.get("text") == "cold" for c in tg.calls("sendMessage")), timeout=30)
        [raw] = claude.usages
    written, plain, out = raw["cache_creation_input_tokens"], raw["input_tokens"], raw["output_tokens"]
    assert written > 0 and raw["cache_read_input_tokens"] == 0
    cost = (plain * 3.0 + written * 3.75 + out * 15.0) / 1e6
    [line] = [line for line in debug_log.getvalue().splitlines() if "turn tg:10 from 10 by a" in line]
    assert f", tokens {plain + written} in ({written} cache write) + {out} out, cost {cost:.4f}, tools run" in line
