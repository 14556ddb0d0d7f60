"""GET /metrics counts model tokens by agent, answering provider, model and kind, and the cost when priced,
fed from where usage is recorded (the usage meter), after real turns on a channel and the gateway."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from orchestrator.gateway import GatewayAddress
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, text, with_usage
from tests.observability.kit import TOKEN, daemon, daemon_toml, samples, scrape, value, write

KEY = "sk-ant-metrics-key"
TOKENS = "orchestrator_model_tokens_total"
COST = "orchestrator_model_cost_total"


def claude_toml(claude: FakeAnthropic) -> str:
    return f"""
[providers.claude]
kind = "anthropic"
base_url = "{claude.base_url}"
api_key_env = "METRICS_CLAUDE_KEY"
max_retries = 0

[providers.claude.prices]
input = 3.0
output = 15.0
cached_input = 0.3
cache_write = 3.75

[agents.writer]
provider = "claude"
model = "claude-x"
system_prompt = "{"Write plainly. " * 200}"
"""


async def _post(address: GatewayAddress, agent: str, message: str) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{address.url}/api/agents/{agent}/messages", json={"text": message},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as response:
            return response.status


async def test_tokens_by_kind_and_cost_are_counted_per_agent_provider_and_model(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METRICS_CLAUDE_KEY", KEY)
    async with FakeAnthropic(api_key=KEY, default=None, min_cacheable_tokens=1) as claude:
        claude.script(anthropic_api.text("cold"), anthropic_api.text("warm"))
        path = write(tmp_path, daemon_toml(fake_llm, extra=claude_toml(claude)))
        async with daemon(path) as (_, term, address):
            _, _, idle = await scrape(address)
            fake_llm.script(with_usage(text("hi alice"), prompt=1200, completion=30, cached=1000))
            term.type("hello")
            await term.screen.wait_for(lambda ls: "hi alice" in ls)
            assert [await _post(address, "writer", m) for m in ("first", "second")] == [200, 200]
            _, _, body = await scrape(address)
        cold, warm = claude.usages
    assert not any(name == TOKENS for name, _ in samples(idle))  # nothing before a call is recorded

    helper = {"agent": "helper", "provider": "fake", "model": "m"}
    assert value(body, TOKENS, {**helper, "kind": "input"}) == 200  # the uncached part of the prompt
    assert value(body, TOKENS, {**helper, "kind": "cached_read"}) == 1000
    assert value(body, TOKENS, {**helper, "kind": "output"}) == 30
    assert value(body, TOKENS, {**helper, "kind": "cache_write"}) is None
    assert value(body, COST, helper) is None  # `fake` has no prices

    writer = {"agent": "writer", "provider": "claude", "model": "claude-x"}
    plain = cold["input_tokens"] + warm["input_tokens"]
    read = cold["cache_read_input_tokens"] + warm["cache_read_input_tokens"]
    written = cold["cache_creation_input_tokens"] + warm["cache_creation_input_tokens"]
    out = cold["output_tokens"] + warm["output_tokens"]
    assert read > 0 and written > 0
    assert value(body, TOKENS, {**writer, "kind": "input"}) == plain
    assert value(body, TOKENS, {**writer, "kind": "cached_read"}) == read
    assert value(body, TOKENS, {**writer, "kind": "cache_write"}) == written
    assert value(body, TOKENS, {**writer, "kind": "output"}) == out
    expected = (plain * 3.0 + read * 0.3 + written * 3.75 + out * 15.0) / 1e6
    assert value(body, COST, writer) == pytest.approx(expected)
