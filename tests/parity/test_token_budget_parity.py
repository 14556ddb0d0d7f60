"""Token budgets and usage rows: the same on every path that runs a turn (L2), enforced by the engine (L1)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from channels import Inbound
from orchestrator.config import Config
from orchestrator.daemon import Disposition, process_message
from orchestrator.engine import StopReason, Transcript, run_tool_call_loop
from orchestrator.seam import PATH_PROFILES, ConstructionPath, ResolvedAgentExecution, Services, UsageMeter, resolve
from orchestrator.seam.matrix import COLUMNS, matrix_columns, settings_of
from orchestrator.store import UsageLog, read_usage
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call, with_usage

TURN_PATHS = [p for p, profile in PATH_PROFILES.items() if profile.runs_turns]
TURN_STOP = (
    "Stopped: the next model call would need about 270 tokens (206 to send, at least 64 for the answer), "
    "and this turn's token budget of 300 tokens has 80 left (220 used so far)."
)


def budget_toml(fake: FakeOpenAI, *, per_turn: int = 300, per_day: int = 100_000) -> str:
    return provider_toml(fake.base_url) + (
        '[providers.fake.prices]\ninput = 2.0\noutput = 10.0\n'
        '[agents.a]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["list_dir"]\n'
        f"[agents.a.budget]\nmax_tokens_per_turn = {per_turn}\nmax_tokens_per_day = {per_day}\n"
    )


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[Services]:
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        yield Services(usage=UsageMeter(log=log))


def paid(reply_text: str = "ok") -> Reply:
    return with_usage(text(reply_text), prompt=200, completion=20)


async def test_every_turn_path_stops_before_a_call_that_would_pass_the_turn_budget(
    fake_llm: FakeOpenAI, load: Callable[..., Config], metered: Services, tmp_path: Path
) -> None:
    config = load(budget_toml(fake_llm))
    try:
        for path in TURN_PATHS:
            fake_llm.script(with_usage(tool_call("list_dir", {}), prompt=200, completion=20))
            asked = len(fake_llm.requests)
            execution = resolve(config, "a", path=path, services=metered)
            assert execution.knobs.max_tokens_per_turn == 300, path
            transcript = Transcript(session=f"s-{path.value}")
            result = await run_tool_call_loop(execution, transcript, "list it", actor="tg:alice")
            # the first call's 200 input tokens are re-sent by the second: 220 + 200 > 300, never made
            assert (result.stop, result.text, result.tokens) == (StopReason.TOKEN_BUDGET, TURN_STOP, 220), path
            assert result.executed == ("list_dir",), path
            assert len(fake_llm.requests) == asked + 1, path  # the second call was never made
            assert transcript.messages[-1] == {"role": "assistant", "content": TURN_STOP}, path
    finally:
        await metered.providers.aclose()
    rows = {t.key: t for t in metered.usage.report(by="sender").rows}  # a read writes what is queued first
    assert list(rows) == ["tg:alice"]
    assert (rows["tg:alice"].calls, rows["tg:alice"].input_tokens) == (len(TURN_PATHS), 200 * len(TURN_PATHS))
    assert rows["tg:alice"].cost == pytest.approx(len(TURN_PATHS) * (200 * 2.0 + 20 * 10.0) / 1e6)


async def test_every_turn_path_records_one_row_per_call_with_its_path(
    fake_llm: FakeOpenAI, load: Callable[..., Config], metered: Services, tmp_path: Path
) -> None:
    config = load(budget_toml(fake_llm, per_turn=100_000))
    try:
        for path in TURN_PATHS:
            fake_llm.script(tool_call("list_dir", {}), text("done"))
            execution = resolve(config, "a", path=path, services=metered)
            result = await run_tool_call_loop(execution, Transcript(session=path.value), "list it")
            assert result.stop is StopReason.COMPLETED, path
    finally:
        await metered.providers.aclose()
    metered.usage.report()  # a read through the log writes what is queued first
    with sqlite3.connect(tmp_path / "usage.sqlite3") as db:
        rows = db.execute("SELECT path, session, sender, estimated FROM usage ORDER BY id").fetchall()
    assert rows == [(p.value, p.value, "-", 0) for p in TURN_PATHS for _ in range(2)]


async def test_engine_keys_the_day_budget_on_agent_and_actor(
    fake_llm: FakeOpenAI, load: Callable[..., Config], metered: Services
) -> None:
    config = load(budget_toml(fake_llm, per_day=400))

    fake_llm.default = paid()

    async def turn(actor: str | None) -> StopReason:
        execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=metered)
        result = await run_tool_call_loop(execution, Transcript(session="s"), "hi", actor=actor)
        if result.stop is StopReason.TOKEN_BUDGET:
            assert "daily token budget of 400 tokens for 'a' is spent (440 used in the last 24 hours)" in result.text
        return result.stop

    try:
        assert [await turn("tg:alice") for _ in range(3)] == [
            StopReason.COMPLETED, StopReason.COMPLETED, StopReason.TOKEN_BUDGET
        ]
        assert await turn("tg:bob") is StopReason.COMPLETED  # bob's day is his own
        assert await turn(None) is StopReason.COMPLETED  # no known person: one shared anonymous day
    finally:
        await metered.providers.aclose()


async def test_the_channel_path_keeps_each_senders_day_and_records_the_sender(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    path = write_config(
        budget_toml(fake_llm, per_day=400)
        + '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n'
        + '[[routes]]\nchannel = "term"\nagent = "a"\nsenders = ["alice", "bob"]\n'
    )
    async with running(path) as (runtime, _):
        state = runtime.config.state_path()
        answered = []
        for n, sender in enumerate(("alice", "alice", "alice", "bob")):
            fake_llm.script(paid(f"done {n}"))
            inbound = Inbound(is_direct=True, channel="term", chat="terminal", sender=sender, text="hi", event_id=f"e{n}")
            assert await process_message(runtime, inbound) is Disposition.ANSWERED
            answered.append(len(fake_llm.requests))
    assert answered == [1, 2, 2, 3]  # alice's third turn never reached the model; bob's did
    senders = {t.key: t.calls for t in read_usage(state / "usage.sqlite3", by="sender")}
    assert senders == {"term:alice": 2, "term:bob": 1}


def test_the_matrix_rows_hold_the_budgets_on_every_path(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    from orchestrator.checks import load_config

    config = load_config(write_config(budget_toml(fake_llm, per_turn=777, per_day=8888)))
    services = Services()
    baseline = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    ceiling = baseline.knobs
    _, columns = matrix_columns(config, "a", dict.fromkeys(COLUMNS, services), parent="a", ceiling=ceiling,
                                schedule_tools=None)
    for column in columns:
        values = settings_of(column.execution, ())
        assert (values["budget.max_tokens_per_turn"], values["budget.max_tokens_per_day"]) == (777, 8888), column.label


async def test_a_delegated_turn_runs_on_what_is_left_of_its_callers_tokens_and_counts_for_it(
    fake_llm: FakeOpenAI, load: Callable[..., Config], metered: Services, seen: list[ResolvedAgentExecution]
) -> None:
    config = load(provider_toml(fake_llm.base_url) + (
        '[agents.lead]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["helper"]\n'
        "[agents.lead.budget]\nmax_tokens_per_turn = 1000\n"
        '[agents.helper]\nprovider = "fake"\nmodel = "h"\n'
    ))
    fake_llm.script(
        with_usage(tool_call("delegate", {"agent": "helper", "task": "help"}), prompt=300, completion=10),
        with_usage(text("helped"), prompt=400, completion=20),
    )
    try:
        lead = resolve(config, "lead", path=ConstructionPath.CLI_RUN, services=metered)
        result = await run_tool_call_loop(lead, Transcript(session="s"), "go", actor="cli:alice")
    finally:
        await metered.providers.aclose()
    helper = next(e for e in seen if e.identity.agent == "helper")
    assert helper.identity.path is ConstructionPath.DELEGATE
    assert helper.knobs.max_tokens_per_turn == 1000 - 310  # what the lead had left when it delegated
    # 310 + the helper's 420 + the next call's ~300 would pass 1000: the lead stops (without the
    # helper's tokens counted, 310 + 300 fits and the call would be made)
    assert (result.stop, result.tokens, len(fake_llm.requests)) == (StopReason.TOKEN_BUDGET, 730, 2)


async def test_every_turn_path_asks_for_no_more_output_than_the_turn_leaves(
    fake_llm: FakeOpenAI, load: Callable[..., Config], metered: Services
) -> None:
    # issue 32: one reply of 40,138 tokens was delivered under a 2,000-token turn budget
    config = load(budget_toml(fake_llm, per_turn=2_000, per_day=10_000_000))
    try:
        for path in TURN_PATHS:
            fake_llm.script(with_usage(text("word " * 40_000), prompt=138, completion=40_000))
            execution = resolve(config, "a", path=path, services=metered)
            result = await run_tool_call_loop(execution, Transcript(session=f"o-{path.value}"), "write", actor="x")
            asked = fake_llm.requests[-1]["max_tokens"]
            assert 0 < 2_000 - asked < 138, path  # the turn's budget less the projected input
            assert result.tokens - 2_000 == 138 - (2_000 - asked), path  # past it only by the estimate's error
            assert result.stop is StopReason.TOKEN_BUDGET, path
    finally:
        await metered.providers.aclose()


def test_max_output_tokens_is_resolved_into_the_binding_on_every_path(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    from orchestrator.checks import load_config

    toml = budget_toml(fake_llm).replace("max_retries = 0", "max_retries = 0\nmax_output_tokens = 777", 1)
    config = load_config(write_config(toml))
    services = Services()
    baseline = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    assert (baseline.model.max_output_tokens, baseline.describe()["max_output_tokens"]) == (777, 777)
    _, columns = matrix_columns(config, "a", dict.fromkeys(COLUMNS, services), parent="a", ceiling=baseline.knobs,
                                schedule_tools=None)
    for column in columns:
        (link,) = settings_of(column.execution, ())["provider_binding"]  # type: ignore[misc]
        assert link.endswith("(max_output_tokens 777 as max_tokens)"), column.label
