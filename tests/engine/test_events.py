"""The engine's turn events: every call the model makes is reported as started, then finished."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.config import Config
from orchestrator.engine import (
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Transcript,
    TurnEvent,
    run_tool_call_loop,
)
from orchestrator.seam import ConstructionPath, Services, resolve
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, paced, text, tool_calls


async def test_events_report_each_call_and_a_failing_observer_never_ends_the_turn(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(
        provider_toml(fake_llm.base_url)
        + '\n[agents.a]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["list_dir"]\n'
    )
    fake_llm.script(tool_calls(("list_dir", {"path": "."}), ("shell", {"argv": ["ls"]})), text("done"))
    events: list[TurnEvent] = []

    async def observe(event: TurnEvent) -> None:
        events.append(event)
        raise RuntimeError("an observer bug")

    execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    result = await run_tool_call_loop(execution, Transcript(session="s"), "go", events=observe)
    assert (result.text, result.executed) == ("done", ("list_dir",))
    started_ls, finished_ls, started_shell, finished_shell = events
    assert isinstance(started_ls, ToolCallStarted) and started_ls.tool == "list_dir"
    assert started_ls.arguments == '{"path": "."}'
    assert isinstance(finished_ls, ToolCallFinished) and finished_ls.ran
    assert finished_ls.call_id == started_ls.call_id
    # a tool outside the registry is reported too, as not run, with what the model was told
    assert isinstance(started_shell, ToolCallStarted) and started_shell.tool == "shell"
    assert isinstance(finished_shell, ToolCallFinished) and not finished_shell.ran
    assert "not available to this agent" in finished_shell.output


async def test_text_streams_only_when_asked_and_observed(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(provider_toml(fake_llm.base_url) + '\n[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    events: list[TurnEvent] = []

    async def observe(event: TurnEvent) -> None:
        events.append(event)

    # paced: the pieces of one network read come as one delta, so the model writes over time
    fake_llm.script(text("plain answer"), text("also plain"), paced(text("streamed answer here"), over_s=0.6))
    await run_tool_call_loop(execution, Transcript(session="a"), "go", events=observe)  # stream not asked
    await run_tool_call_loop(execution, Transcript(session="b"), "go", stream=True)  # nobody observes
    result = await run_tool_call_loop(execution, Transcript(session="c"), "go", events=observe, stream=True)
    assert ["stream" in r for r in fake_llm.requests] == [False, False, True]
    assert all(isinstance(e, TextDelta) for e in events) and len(events) > 1
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.text == "streamed answer here"
