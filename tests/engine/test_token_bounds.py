"""L1: no model call passes a token budget by more than the error of its input estimate.

Each call asks for at most what the tightest budget leaves (`max_tokens`); the loopback
fakes stop there as the real APIs do (`finish_reason: "length"`, `stop_reason:
"max_tokens"`), so what a call used past a budget is only what its input was under-estimated
by. Issue 32 found one reply of 40,138 tokens delivered under a 2,000-token turn budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.engine import StopReason, Transcript, TurnEvent, run_tool_call_loop
from orchestrator.seam import ConstructionPath, Services, UsageMeter, budget_key, resolve
from orchestrator.store import UsageLog
from tests.conftest import provider_toml
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, with_usage

pytestmark = pytest.mark.slow

KEY = "sk-ant-bounds-key"
KEY_ENV = "ORCHESTRATOR_BOUNDS_TEST_KEY"
LONG = "word " * 40_000  # what the model would write if nothing stopped it: about 50,000 tokens


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY, default=None) as fake:
        yield fake


def agent_toml(provider: str, *, per_turn: int, per_day: int, extra: str = "") -> str:
    return (
        f'[agents.a]\nprovider = "{provider}"\nmodel = "m"\n'
        f"{extra}[agents.a.budget]\nmax_tokens_per_turn = {per_turn}\nmax_tokens_per_day = {per_day}\n"
    )


def claude_toml(base_url: str) -> str:
    return f'[providers.claude]\nkind = "anthropic"\nbase_url = "{base_url}"\napi_key_env = "{KEY_ENV}"\nmax_retries = 0\n'


async def _ignore(event: TurnEvent) -> None:
    return None


async def _turn(config: Config, services: Services, *, stream: bool, actor: str = "tg:alice") -> Any:
    execution = resolve(config, "a", path=ConstructionPath.CHANNEL, services=services)
    return await run_tool_call_loop(
        execution, Transcript(session="s"), "write it all", actor=actor, events=_ignore if stream else None,
        stream=stream,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
async def test_openai_one_long_reply_passes_the_turn_budget_only_by_the_input_estimates_error(
    stream: bool, fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(provider_toml(fake_llm.base_url) + agent_toml("fake", per_turn=2_000, per_day=3_000))
    fake_llm.script(with_usage(text(LONG), prompt=138, completion=40_000))  # the 40,138 tokens
    result = await _turn(config, services, stream=stream)
    (request,) = fake_llm.requests
    asked = request["max_tokens"]
    projected = 2_000 - asked  # what the engine estimated the call would send
    assert 0 < projected < 138
    assert fake_llm.usages[-1]["completion_tokens"] == asked  # the fake stopped where it was told
    # what passed the budget is exactly what the input was under-estimated by, not 38,138
    assert result.tokens - 2_000 == 138 - projected
    assert result.stop is StopReason.TOKEN_BUDGET
    assert result.text.endswith(f"[cut short: the token budget left this answer {asked} tokens]")
    assert len(result.text) < 4 * asked + 100


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
async def test_anthropic_one_long_reply_passes_the_turn_budget_only_by_the_input_estimates_error(
    stream: bool, claude: FakeAnthropic, load: Callable[..., Config], services: Services
) -> None:
    config = load(claude_toml(claude.base_url) + agent_toml("claude", per_turn=2_000, per_day=3_000))
    claude.script(anthropic_api.text(LONG))
    result = await _turn(config, services, stream=stream)
    (request,) = claude.requests
    asked = request["max_tokens"]  # was always 4,096, whatever the budgets left
    usage = claude.usages[-1]
    sent = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    projected = 2_000 - asked
    assert 0 < projected
    assert usage["output_tokens"] == asked
    assert result.tokens - 2_000 == sent - projected  # the estimate's error, and nothing more
    assert result.stop is StopReason.TOKEN_BUDGET


async def test_a_reply_asks_for_no_more_than_what_is_left_of_the_day(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(provider_toml(fake_llm.base_url) + agent_toml("fake", per_turn=1_000_000, per_day=3_000))
    fake_llm.script(with_usage(text("first"), prompt=500, completion=280), with_usage(text(LONG), prompt=138, completion=40_000))
    assert (await _turn(config, services, stream=False)).stop is StopReason.COMPLETED
    second = await _turn(config, services, stream=False)
    asked = fake_llm.requests[1]["max_tokens"]
    projected = 3_000 - 780 - asked
    assert 0 < projected < 138
    spent = services.usage.spent_today(budget_key("a", "tg:alice"))
    assert spent - 3_000 == 138 - projected  # was 780 + 40,138
    assert second.stop is StopReason.TOKEN_BUDGET


async def test_a_call_whose_projection_alone_passes_the_day_says_what_is_left_and_what_it_needs(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    # issue 25: the line said "is spent (0 used in the last 24 hours)" when only the projection passed it
    prompt = 'system_prompt = "' + "x" * 2_000 + '"\n'
    config = load(provider_toml(fake_llm.base_url) + agent_toml("fake", per_turn=100_000, per_day=300, extra=prompt))
    result = await _turn(config, services, stream=False)
    assert fake_llm.requests == []
    assert result.stop is StopReason.TOKEN_BUDGET
    assert "is spent" not in result.text
    assert result.text.startswith("Stopped: the next model call would need about ")
    assert result.text.endswith(
        "and the daily token budget of 300 tokens for 'a' has 300 left (0 used in the last 24 hours); try again later."
    )


def chain_toml(base_url: str, *, a_day: int) -> str:
    return provider_toml(base_url) + (
        '[agents.a]\nprovider = "fake"\nmodel = "a-model"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["b"]\n'
        f"[agents.a.budget]\nmax_tokens_per_day = {a_day}\n"
        '[agents.b]\nprovider = "fake"\nmodel = "b-model"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["c"]\n'
        '[agents.c]\nprovider = "fake"\nmodel = "c-model"\n'
    )


async def test_nested_delegation_charges_every_caller_up_the_chain_and_survives_a_restart(
    fake_llm: FakeOpenAI, load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(chain_toml(fake_llm.base_url, a_day=1_000_000))
    fake_llm.script(
        with_usage(tool_call("delegate", {"agent": "b", "task": "pass it on"}), prompt=100, completion=10),
        with_usage(tool_call("delegate", {"agent": "c", "task": "do it"}), prompt=200, completion=20),
        with_usage(text("done by c"), prompt=400, completion=40),
        with_usage(text("b done"), prompt=300, completion=30),
        with_usage(text("a done"), prompt=150, completion=15),
    )
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        services = Services(usage=UsageMeter(log=log))
        try:
            result = await _run_a(config, services)
        finally:
            await services.providers.aclose()
        assert result.stop is StopReason.COMPLETED and result.text == "a done"
        a_own, b_own, c_own = 110 + 165, 220 + 330, 440
        days = {agent: services.usage.spent_today(budget_key(agent, "cli:alice")) for agent in "abc"}
        assert days == {"a": a_own + b_own + c_own, "b": b_own + c_own, "c": c_own}
        assert result.tokens == a_own + b_own + c_own  # the per-turn budget already agreed
        restarted = UsageMeter(log=log)  # a restart reads the same days back from the table
        assert {agent: restarted.spent_today(budget_key(agent, "cli:alice")) for agent in "abc"} == days


async def test_a_spent_callers_day_stops_the_delegate_before_its_model_call(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(chain_toml(fake_llm.base_url, a_day=1_000))
    fake_llm.script(with_usage(tool_call("delegate", {"agent": "b", "task": "spend"}), prompt=950, completion=60))
    transcript = Transcript(session="s")
    result = await _run_a(config, services, transcript)
    assert [r["model"] for r in fake_llm.requests] == ["a-model"]  # b's call was never made, nor a's next
    (told,) = [m["content"] for m in transcript.messages if m["role"] == "tool"]
    assert told == (
        "Error: the daily token budget of 1000 tokens for 'a' is spent (1010 used in the last 24 hours); "
        "'b' was not started"
    )
    assert result.stop is StopReason.TOKEN_BUDGET
    assert result.text == (
        "Stopped: the daily token budget of 1000 tokens for 'a' is spent (1010 used in the last 24 hours); "
        "try again later."
    )


async def test_a_delegates_answer_is_bounded_by_its_callers_day(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(chain_toml(fake_llm.base_url, a_day=2_000))
    fake_llm.script(
        with_usage(tool_call("delegate", {"agent": "b", "task": "write a lot"}), prompt=100, completion=10),
        with_usage(text(LONG), prompt=138, completion=40_000),
    )
    result = await _run_a(config, services)
    b_asked = fake_llm.requests[1]["max_tokens"]
    assert fake_llm.requests[1]["model"] == "b-model" and b_asked < 2_000 - 110  # b's own day is 20 M
    spent = services.usage.spent_today(budget_key("a", "cli:alice"))
    assert spent - 2_000 == 138 - (2_000 - 110 - b_asked)  # the estimate's error of b's input, nothing more
    assert result.stop is StopReason.TOKEN_BUDGET and len(fake_llm.requests) == 2


async def _run_a(config: Config, services: Services, transcript: Transcript | None = None) -> Any:
    execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    return await run_tool_call_loop(execution, transcript or Transcript(session="s"), "go", actor="cli:alice")


async def test_a_day_met_twice_up_the_chain_is_charged_once(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(provider_toml(fake_llm.base_url) + (
        '[agents.a]\nprovider = "fake"\nmodel = "a-model"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["b"]\n'
        '[agents.b]\nprovider = "fake"\nmodel = "b-model"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["a"]\n'
    ))
    fake_llm.script(
        with_usage(tool_call("delegate", {"agent": "b", "task": "ask a"}), prompt=100, completion=10),
        with_usage(tool_call("delegate", {"agent": "a", "task": "answer"}), prompt=200, completion=20),
        with_usage(text("a answers"), prompt=400, completion=40),
        with_usage(text("b done"), prompt=300, completion=30),
        with_usage(text("a done"), prompt=150, completion=15),
    )
    result = await _run_a(config, services)
    assert result.text == "a done"
    days = {agent: services.usage.spent_today(budget_key(agent, "cli:alice")) for agent in "ab"}
    assert days == {"a": 110 + 220 + 440 + 330 + 165, "b": 220 + 440 + 330}  # each call once per day


async def test_two_calls_in_flight_for_one_sender_are_not_each_allowed_the_same_day(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    # several gateway callers share one key: calls at once must not each be allowed what is left
    config = load(provider_toml(fake_llm.base_url) + agent_toml("fake", per_turn=1_000_000, per_day=3_000))
    fake_llm.latency_s = 0.2  # both turns are in flight together, whichever asks first
    fake_llm.default = with_usage(text(LONG), prompt=20, completion=40_000)
    results = await asyncio.gather(*(_turn(config, services, stream=False) for _ in range(2)))
    assert all(r.stop is StopReason.TOKEN_BUDGET for r in results)
    spent = services.usage.spent_today(budget_key("a", "tg:alice"))
    assert 3_000 - 20 < spent <= 3_000 + 20  # one call's estimate error past the day, not two answers
