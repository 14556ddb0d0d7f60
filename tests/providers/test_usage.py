"""Both provider kinds report each call's usage, streamed or not, in one shape (`Usage`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from orchestrator.providers import Prices, Usage
from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.openai_compat import OpenAICompatProvider
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, with_usage

USER = ({"role": "user", "content": "hi"},)
KEY = "sk-ant-test-0123456789"


async def _ignore(piece: str) -> None:
    return None


def _openai(base_url: str, *, stream_usage: bool = True) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        name="fake", base_url=base_url, api_key=None, timeout_s=5.0, max_retries=0, stream_usage=stream_usage
    )


@pytest.mark.parametrize("on_text", [None, _ignore], ids=["unstreamed", "streamed"])
async def test_openai_usage_counts_cached_tokens_inside_the_prompt(
    on_text: Callable[[str], Awaitable[None]] | None,
) -> None:
    async with FakeOpenAI(default=None) as fake, _openai(fake.base_url) as provider:
        fake.script(with_usage(tool_call("read", {"p": 1}), prompt=1200, completion=30, cached=1000))
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=on_text)
    assert completion.usage == Usage(input_tokens=1200, output_tokens=30, cached_tokens=1000)
    assert completion.usage.total == 1230


async def test_openai_stream_usage_false_sends_no_stream_options_and_reports_none() -> None:
    async with FakeOpenAI(default=None) as fake, _openai(fake.base_url, stream_usage=False) as provider:
        fake.script(text("hello there"))
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=_ignore)
    assert "stream_options" not in fake.requests[0]
    assert completion.text == "hello there" and completion.usage is None


async def test_openai_server_without_usage_gives_none_not_an_error() -> None:
    async with FakeOpenAI(default=None) as fake, _openai(fake.base_url) as provider:
        fake.report_usage = False
        fake.script(text("a"), text("b"))
        plain = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        streamed = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=_ignore)
    assert (plain.text, plain.usage, streamed.text, streamed.usage) == ("a", None, "b", None)


@pytest.mark.parametrize("on_text", [None, _ignore], ids=["unstreamed", "streamed"])
async def test_anthropic_usage_adds_cache_reads_and_writes_to_the_input(
    on_text: Callable[[str], Awaitable[None]] | None,
) -> None:
    system = {"role": "system", "content": "You are ops. " * 200}
    first = [system, {"role": "user", "content": "one"}]
    second = [*first, {"role": "assistant", "content": "done"}, {"role": "user", "content": "two"}]
    async with FakeAnthropic(default=None, api_key=KEY) as fake:
        provider = AnthropicProvider(name="claude", base_url=fake.base_url, api_key=KEY, timeout_s=5.0, max_retries=0)
        async with provider:
            fake.script(anthropic_api.text("done"), anthropic_api.text("done two"))
            cold = await provider.complete(model="m", messages=first, tools=(), temperature=None, on_text=on_text)
            warm = await provider.complete(model="m", messages=second, tools=(), temperature=None, on_text=on_text)
    reported = fake.usages
    for completion, raw in zip((cold, warm), reported, strict=True):
        assert completion.usage == Usage(
            input_tokens=raw["input_tokens"] + raw["cache_read_input_tokens"] + raw["cache_creation_input_tokens"],
            output_tokens=raw["output_tokens"],
            cached_tokens=raw["cache_read_input_tokens"],
            cache_write_tokens=raw["cache_creation_input_tokens"],
        )
    assert cold.usage is not None and cold.usage.cached_tokens == 0
    assert cold.usage.cache_write_tokens > cold.usage.input_tokens // 2  # the long system prompt was written
    assert warm.usage is not None and warm.usage.cached_tokens > warm.usage.input_tokens // 2


def test_prices_charge_cached_input_at_its_own_rate() -> None:
    prices = Prices(input=3.0, output=15.0, cached_input=0.3)
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=500_000)
    assert prices.cost(usage) == pytest.approx(0.5 * 3.0 + 0.5 * 0.3 + 0.1 * 15.0)
    assert prices.cost(Usage(input_tokens=0, output_tokens=0)) == 0.0


def test_prices_charge_cache_writes_at_their_own_rate_and_default_to_the_input_price() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=100_000, cache_write_tokens=400_000)
    anthropic = Prices(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)  # 1.25x input: a 5-minute write
    assert anthropic.cost(usage) == pytest.approx(0.5 * 3.0 + 0.1 * 0.3 + 0.4 * 3.75)
    unpriced_writes = Prices(input=3.0, output=15.0, cached_input=0.3)  # never free: the input price
    assert unpriced_writes.cost(usage) == pytest.approx(0.9 * 3.0 + 0.1 * 0.3)
