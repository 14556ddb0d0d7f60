"""Each model call is one usage row, naming the link that answered (failover included), priced by it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import orchestrator
from orchestrator.checks import load_config
from orchestrator.store import read_usage
from tests.conftest import WriteConfig
from tests.fakes import anthropic_api, openai_server
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-ant-usage-key"
KEY_ENV = "ORCHESTRATOR_USAGE_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def chain_toml(primary: str, local: str) -> str:
    return f"""
[providers.claude]
kind = "anthropic"
base_url = "{primary}"
api_key_env = "{KEY_ENV}"
max_retries = 0

[providers.claude.prices]
input = 3.0
output = 15.0
cached_input = 0.3
cache_write = 3.75

[providers.local]
base_url = "{local}"
max_retries = 0

[providers.local.prices]
input = 1.0
output = 2.0

[agents.ops]
provider = "claude"
model = "claude-x"
fallback = [{{ provider = "local", model = "qwen" }}]
system_prompt = "Be brief."
"""


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY, default=None) as fake:
        yield fake


@pytest.fixture
async def local() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default=None) as fake:
        yield fake


def usage_file(path: Path) -> Path:
    return load_config(path).state_path() / "usage.sqlite3"


async def test_a_failed_over_call_is_recorded_for_the_link_that_answered(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.script(anthropic_api.error(500, message="down"))
    local.script(openai_server.with_usage(openai_server.text("from local"), prompt=1000, completion=100))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert (result.provider, result.failed_over, result.tokens) == ("local", True, 1100)
    [row] = read_usage(usage_file(path), by="model")
    assert (row.key, row.calls, row.input_tokens, row.output_tokens) == ("local/qwen", 1, 1000, 100)
    assert row.cost == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)  # local's prices, not claude's


async def test_anthropic_calls_record_cache_reads_and_writes_at_their_own_prices(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.min_cacheable_tokens = 1
    claude.script(anthropic_api.text("one"), anthropic_api.text("two"))
    path = write_config(chain_toml(claude.base_url, local.base_url).replace('"Be brief."', '"' + "Be brief. " * 300 + '"'))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        await agent.run("first")
        await agent.run("second")
    cold, warm = claude.usages
    [row] = read_usage(usage_file(path), by="model")
    assert row.key == "claude/claude-x" and row.calls == 2
    assert row.cached_tokens == warm["cache_read_input_tokens"] > 0
    assert row.input_tokens == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in (cold, warm)
    )
    assert row.cache_write_tokens == cold["cache_creation_input_tokens"] > 0
    assert warm["cache_creation_input_tokens"] == 0  # the second turn only reads the prefix
    plain = row.input_tokens - row.cached_tokens - row.cache_write_tokens
    assert row.cost == pytest.approx(
        (plain * 3.0 + row.cached_tokens * 0.3 + row.cache_write_tokens * 3.75 + row.output_tokens * 15.0) / 1e6
    )
    assert local.requests == []


async def test_a_server_that_reports_no_usage_is_recorded_as_an_estimate(
    write_config: WriteConfig, local: FakeOpenAI
) -> None:
    local.report_usage = False
    local.script(openai_server.text("x" * 400))
    path = write_config(f'[providers.local]\nbase_url = "{local.base_url}"\nmax_retries = 0\n'
                        '[agents.solo]\nprovider = "local"\nmodel = "qwen"\n')
    async with orchestrator.Agent.from_config(path, "solo") as agent:
        result = await agent.run("hello there")
    [row] = read_usage(usage_file(path))
    assert (row.estimated_calls, row.output_tokens, row.cost) == (1, 100, None)  # 400 characters / 4; no prices
    assert row.input_tokens >= 1 and result.tokens == row.input_tokens + row.output_tokens
