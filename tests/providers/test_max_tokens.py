"""Both clients send the output limit the engine asks for, within the provider's own, and read a cut answer.

An answer stopped at `max_tokens` (OpenAI `finish_reason: "length"`, Anthropic
`stop_reason: "max_tokens"`) comes back `cut`, streamed or not, and a tool call it was still
writing is left out: its arguments are incomplete.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.openai_compat import OpenAICompatProvider
from tests.fakes import anthropic_api, openai_server
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.providers.kit import Pieces

KEY = "sk-ant-max-tokens-0123"
USER = ({"role": "user", "content": "hi"},)
LONG = "word " * 4_000  # about 5,000 tokens


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default=None) as fake:
        yield fake


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(default=None, api_key=KEY) as fake:
        yield fake


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
async def test_openai_sends_the_asked_limit_within_its_own_and_reads_a_cut_answer(
    stream: bool, param: str, openai_fake: FakeOpenAI
) -> None:
    openai_fake.script(
        openai_server.text(LONG), openai_server.tool_call("read", {"path": "x" * 4_000}), openai_server.text("short")
    )
    sink = Pieces() if stream else None
    async with OpenAICompatProvider(
        name="fake", base_url=openai_fake.base_url, api_key=None, timeout_s=5, max_retries=0,
        max_output_tokens=300, max_tokens_param=param,  # type: ignore[arg-type]
    ) as provider:
        cut = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink, max_tokens=200)
        call = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink, max_tokens=50)
        whole = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert [r[param] for r in openai_fake.requests] == [200, 50, 300]  # None: the provider's own limit
    other = "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"
    assert all(other not in r for r in openai_fake.requests)
    assert cut.cut and cut.text is not None and len(cut.text) == 800 and cut.usage is not None
    assert cut.usage.output_tokens == 200
    assert call.cut and call.tool_calls == ()  # its arguments were cut: never handed on
    assert not whole.cut and whole.text == "short"


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
async def test_anthropic_sends_the_asked_limit_within_its_own_and_reads_a_cut_answer(
    stream: bool, claude: FakeAnthropic
) -> None:
    claude.script(
        anthropic_api.text(LONG), anthropic_api.tool_use("read", {"path": "x" * 4_000}, content="reading"),
        anthropic_api.text("short"),
    )
    sink = Pieces() if stream else None
    async with AnthropicProvider(
        name="claude", base_url=claude.base_url, api_key=KEY, timeout_s=5, max_retries=0, max_tokens=300
    ) as provider:
        cut = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink, max_tokens=200)
        call = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink, max_tokens=900)
        whole = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    # 900 is over the provider's own 300: it asks for 300; None asks for 300 too
    assert [r["max_tokens"] for r in claude.requests] == [200, 300, 300]
    assert cut.cut and cut.usage is not None and cut.usage.output_tokens == 200
    assert cut.text is not None and 0 < len(cut.text) <= 800
    assert call.cut and call.tool_calls == () and call.text == "reading"
    assert not whole.cut and whole.text == "short"
