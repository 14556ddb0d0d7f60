"""L1 engine locks, on every path that runs turns: what the policy denies never executes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.policy import Interactivity
from orchestrator.seam import PATH_PROFILES, Services, resolve
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls

TURN_PATHS = [p for p, profile in PATH_PROFILES.items() if profile.runs_turns]


async def test_excluded_tool_never_executes_on_any_turn_path(
    fake_llm: FakeOpenAI, parity_config: Callable[[FakeOpenAI], tuple[Path, Config]]
) -> None:
    _, config = parity_config(fake_llm)
    services = Services()
    try:
        for path in TURN_PATHS:
            execution = resolve(config, "ops", path=path, services=services)
            target = execution.security.workspace / f"{path.value}.txt"
            fake_llm.script(tool_call("file_write", {"path": target.name, "content": "x"}), text("ok"))
            result = await run_tool_call_loop(execution, Transcript(session=path.value), "write it")
            assert result.executed == (), path
            assert not target.exists(), path
            assert "file_write" not in execution.tools
    finally:
        await services.providers.aclose()


async def test_no_operator_denies_on_every_non_interactive_path(
    fake_llm: FakeOpenAI, parity_config: Callable[[FakeOpenAI], tuple[Path, Config]]
) -> None:
    _, config = parity_config(fake_llm)
    services = Services()
    try:
        for path in TURN_PATHS:
            execution = resolve(config, "ops", path=path, services=services)
            # shell is in always_ask: it needs a human on every path; none is supplied here
            fake_llm.script(tool_calls(("shell", {"argv": ["echo", "hi"]}), ("list_dir", {})), text("ok"))
            result = await run_tool_call_loop(execution, Transcript(session="s"), "go", approver=None)
            assert result.executed == ("list_dir",), path
            denial = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"][0]["content"]
            assert "no operator decided" in denial, path
            mode = execution.approvals.interactivity
            assert (mode is Interactivity.NON_INTERACTIVE) == (
                PATH_PROFILES[path].interactivity is Interactivity.NON_INTERACTIVE
            )
    finally:
        await services.providers.aclose()
