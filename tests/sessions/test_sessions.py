"""Sessions.run_turn, the one turn runner: order, hooks, stop, gate and cancellation, with the fake LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.engine import Transcript
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, build_library, open_services
from orchestrator.sessions import Sessions, StoredTranscripts, Turn, TurnHook, TurnRefused, TurnStopped
from orchestrator.store import SessionStore
from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, text

AGENT = '\n[agents.ops]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "You are ops."\n'


@asynccontextmanager
async def opened(path: Path) -> AsyncIterator[tuple[Config, Services, SessionStore]]:
    config = load_config(path)
    async with open_services(config, ["ops"], ConstructionPath.LIBRARY) as services:
        with SessionStore(config.state_path() / "sessions.sqlite3") as store:
            yield config, services, store


def execution(config: Config, services: Services) -> ResolvedAgentExecution:
    return build_library(config, "ops", services, approver_supplied=False)


async def test_hooks_wrap_the_turn_in_order_and_see_it_persisted(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(text("hello"))
    seen: list[str] = []
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):

        def hook(name: str) -> TurnHook:
            @asynccontextmanager
            async def watch(turn: Turn) -> AsyncIterator[None]:
                seen.append(f"{name} enters")
                yield
                assert turn.result is not None
                stored, total = store.load_messages(store.open_session("k", "ops"))
                seen.append(f"{name} exits after {turn.result.text!r}, {total} stored")

            return watch

        sessions = Sessions(transcripts=StoredTranscripts(store), hooks=(hook("every"),))
        turn = await sessions.run_turn(
            "k", agent="ops", execution=execution(config, services), text="hi", approver=None, actor=None,
            hooks=(hook("this"),),
        )
    assert turn.completed().text == "hello"
    assert seen == ["every enters", "this enters", "this exits after 'hello', 2 stored", "every exits after 'hello', 2 stored"]
    assert len(sessions) == 0  # nobody holds the session any more


async def test_a_child_turn_runs_inside_every_hook_under_the_session_its_caller_holds(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(text("step done"))
    seen: list[tuple[str, str, str, str | None]] = []
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):

        def hook(name: str) -> TurnHook:
            @asynccontextmanager
            async def watch(turn: Turn) -> AsyncIterator[None]:
                seen.append((name, turn.key, turn.agent, None))
                yield
                seen.append((name, turn.key, turn.agent, turn.completed().text))

            return watch

        sessions = Sessions(transcripts=StoredTranscripts(store), hooks=(hook("every"),))
        child = Transcript(session="k/sop:x:1", parent="ops")

        async def step() -> Turn:  # as an SOP in a chat runs it: inside the chat's session
            return await sessions.run_child(
                child, agent="ops", execution=execution(config, services), text="do it", approver=None, actor=None,
                hooks=(hook("this"),),
            )

        turn = await sessions.run_task("k", step)
        _, stored = store.load_messages(store.open_session("k", "ops"))
    assert turn is not None and turn.completed().text == "step done"
    key = "k/sop:x:1"
    assert seen == [
        ("every", key, "ops", None), ("this", key, "ops", None),
        ("this", key, "ops", "step done"), ("every", key, "ops", "step done"),
    ]
    assert [m["content"] for m in child.messages] == ["do it", "step done"]  # the caller's transcript
    assert stored == 0 and len(sessions) == 0  # nothing loaded or saved for the session; nobody holds it


async def test_turns_of_one_session_run_one_at_a_time_in_arrival_order(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.latency_s = 0.2
    fake_llm.script(text("first answer"), text("second answer"))
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):
        sessions = Sessions(transcripts=StoredTranscripts(store))
        resolved = execution(config, services)
        turns = await asyncio.gather(
            *(
                sessions.run_turn("k", agent="ops", execution=resolved, text=q, approver=None, actor=None)
                for q in ("first", "second")
            )
        )
    assert [t.completed().text for t in turns] == ["first answer", "second answer"]
    contents = [m["content"] for m in fake_llm.requests[1]["messages"][1:]]
    assert contents == ["first", "first answer", "second"]


async def test_stop_ends_the_turn_without_a_result_and_keeps_what_it_did(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.latency_s = 30
    fake_llm.script(text("never seen"))
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):
        sessions = Sessions(transcripts=StoredTranscripts(store))
        assert not sessions.stop("k")  # nothing runs yet
        running = asyncio.ensure_future(
            sessions.run_turn("k", agent="ops", execution=execution(config, services), text="slow", approver=None, actor=None)
        )
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        assert sessions.busy("k") and sessions.stop("k")
        turn = await running
        stored, _ = store.load_messages(store.open_session("k", "ops"))
    assert turn.result is None
    with pytest.raises(TurnStopped):
        turn.completed()
    assert [m["content"] for m in stored][:1] == ["slow"]  # the user's message is kept


async def test_a_closed_gate_runs_nothing(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):
        sessions = Sessions(transcripts=StoredTranscripts(store))
        with pytest.raises(TurnRefused):
            await sessions.run_turn(
                "k", agent="ops", execution=execution(config, services), text="hi", approver=None, actor=None,
                gate=lambda: False,
            )
        assert len(sessions) == 0 and list(store.sessions()) == []
    assert fake_llm.requests == []


async def test_cancelling_the_caller_persists_the_turn_and_propagates(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.latency_s = 30
    fake_llm.script(text("never seen"))
    exits: list[str] = []

    @asynccontextmanager
    async def watch(turn: Turn) -> AsyncIterator[None]:
        try:
            yield
        except asyncio.CancelledError:
            exits.append("cancelled")
            raise

    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):
        sessions = Sessions(transcripts=StoredTranscripts(store))
        running = asyncio.ensure_future(
            sessions.run_turn(
                "k", agent="ops", execution=execution(config, services), text="slow", approver=None, actor=None,
                hooks=(watch,),
            )
        )
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        stored, _ = store.load_messages(store.open_session("k", "ops"))
    assert exits == ["cancelled"]
    assert [m["content"] for m in stored][:1] == ["slow"]


async def test_an_added_hook_watches_the_turns_events_after_the_callers_own(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    from orchestrator.engine import ToolCallFinished, ToolCallStarted, TurnEvent
    from tests.fakes.openai_server import tool_call

    agent = AGENT + 'tools = ["list_dir"]\n[agents.ops.approval]\nauto_approve = ["list_dir"]\n'
    fake_llm.script(tool_call("list_dir", {"path": "."}), text("listed"), text("unwatched"))
    seen: list[str] = []
    async with opened(write_config(provider_toml(fake_llm.base_url) + agent)) as (config, services, store):

        async def caller(event: TurnEvent) -> None:
            if isinstance(event, ToolCallStarted | ToolCallFinished):
                seen.append(f"caller {type(event).__name__}")

        async def failing(event: TurnEvent) -> None:
            raise RuntimeError("a broken observer")

        async def added(event: TurnEvent) -> None:
            seen.append(f"added {type(event).__name__}")

        @asynccontextmanager
        async def hook(turn: Turn) -> AsyncIterator[None]:
            assert turn.execution is not None and turn.execution.identity.agent == "ops"
            turn.watch(failing)
            turn.watch(added)
            yield

        sessions = Sessions(transcripts=StoredTranscripts(store))
        remove = sessions.add_hook(hook)
        run = execution(config, services)
        first = await sessions.run_turn("k", agent="ops", execution=run, text="ls", approver=None, actor=None, events=caller)
        remove()
        await sessions.run_turn("k", agent="ops", execution=run, text="again", approver=None, actor=None)
    assert first.completed().executed == ("list_dir",)
    assert seen == [
        "caller ToolCallStarted", "added ToolCallStarted", "caller ToolCallFinished", "added ToolCallFinished",
    ]


async def test_queue_lengths_count_who_waits_behind_the_running_turn(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.latency_s = 0.5
    fake_llm.script(text("one"), text("two"), text("three"))
    async with opened(write_config(provider_toml(fake_llm.base_url) + AGENT)) as (config, services, store):
        sessions = Sessions(transcripts=StoredTranscripts(store))
        run = execution(config, services)
        turns = [
            asyncio.ensure_future(sessions.run_turn("k", agent="ops", execution=run, text=t, approver=None, actor=None))
            for t in ("a", "b", "c")
        ]
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        assert sessions.queue_lengths() == {"k": 2}
        await asyncio.gather(*turns)
        assert sessions.queue_lengths() == {}
