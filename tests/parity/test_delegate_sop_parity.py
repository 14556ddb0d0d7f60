"""L2 parity for the delegate and SOP-step paths: the target / step agent gets its OWN cli-run
policy, differing only by what each path declares: `parent` (the caller), the caller's
remaining budgets as a ceiling (delegate), the step's `tools` as caller_allowed (SOP), and the
parent surface's interactivity."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.memory import MemoryStore
from orchestrator.peripherals import PeripheralPool
from orchestrator.policy import Interactivity
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, ScopedAssembly, Services, resolve
from tests.conftest import WriteConfig
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.parity.conftest import parity_toml
from tests.parity.test_l2_paths import comparable

# Budgets that are the caller's turn budgets (a delegation ceiling lowers them); the rest stay the target's.
CEILING_KEYS = ("max_tool_iterations", "turn_timeout_s", "tool_timeout_s", "max_tool_result_chars", "max_tokens_per_turn")
NARROWING = ("file_read", "arm__status", "http_fetch")


def without(described: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in comparable(described).items() if k not in keys}


async def test_delegate_path_resolves_the_targets_cli_run_policy_modulo_ceiling(
    fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution]
) -> None:
    path = write_config(
        parity_toml(fake_llm.base_url)
        + '\n[agents.lead]\nprovider = "fake"\nmodel = "lead-model"\nautonomy = "full"\n'
        'tools = ["delegate"]\ndelegates = ["ops", "intern"]\n'
        '\n[channels.term]\nkind = "terminal"\nuser = "u1"\n'
        '[[routes]]\nchannel = "term"\nagent = "lead"\nsenders = ["u1"]\n'
    )
    fake_llm.script(
        tool_call("delegate", {"agent": "ops", "task": "t1"}), text("ops ok"),
        tool_call("delegate", {"agent": "intern", "task": "t2"}), text("intern ok"),
        text("both done"),
    )
    async with running(path) as (runtime, terms):
        terms["term"].type("go")
        await terms["term"].screen.wait_for(lambda lines: "both done" in lines)
        services = Services(memory=runtime.services.memory, peripherals=runtime.services.peripherals)
        baselines = {a: resolve(runtime.config, a, path=ConstructionPath.CLI_RUN, services=services) for a in ("ops", "intern")}
    lead, ops, intern = seen
    for child, request, iteration in ((ops, fake_llm.requests[1], 1), (intern, fake_llm.requests[3], 2)):
        own = baselines[child.identity.agent]
        assert child.identity.path is ConstructionPath.DELEGATE and child.identity.parent == "lead"
        assert without(child.describe(), "parent", "knobs") == without(own.describe(), "parent", "knobs")
        assert child.approvals.interactivity is Interactivity.CHANNEL_PROMPT  # the caller surface's mode
        mine, theirs = child.describe()["knobs"], own.describe()["knobs"]
        assert isinstance(mine, dict) and isinstance(theirs, dict)
        assert {k: mine[k] for k in mine if k not in CEILING_KEYS} == {k: theirs[k] for k in theirs if k not in CEILING_KEYS}
        assert all(mine[k] <= theirs[k] for k in CEILING_KEYS)
        assert mine["max_tool_iterations"] == min(theirs["max_tool_iterations"], 10 - iteration)
        assert request.get("tools", []) == list(child.tools.provider_specs())
        assert (request["model"], request["temperature"]) == (child.model.model, child.model.temperature)
    assert "arm__status" in ops.tools and ops.memory.mode == "agent"  # the target's own grant, not the lead's
    assert lead.tools.names == ("delegate",)


async def test_sop_step_path_resolves_the_step_agents_cli_run_policy_modulo_step_tools(
    fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution], tmp_path: Any
) -> None:
    tools = ", ".join(f'"{t}"' for t in NARROWING)
    path = write_config(
        parity_toml(fake_llm.base_url)
        + '\n[sops.parity]\nagent = "ops"\n'
        '[[sops.parity.steps]]\nprompt = "one"\n'
        '[[sops.parity.steps]]\nprompt = "two"\nagent = "intern"\n'
        f'[[sops.parity.steps]]\nprompt = "three"\ntools = [{tools}]\n'
    )
    fake_llm.script(text("1"), text("2"), text("3"))
    code = await asyncio.to_thread(cli.main, ["sop", "parity", "--config", str(path)])
    assert code == 0
    config = load_config(path)
    with MemoryStore(config.state_path() / "memory.sqlite3") as memory:
        services = Services(memory=memory, peripherals=PeripheralPool())
        own = {a: resolve(config, a, path=ConstructionPath.CLI_RUN, services=services) for a in ("ops", "intern")}
        narrowed = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=services,
                           assembly=ScopedAssembly(caller_allowed=frozenset(NARROWING)))
    first, second, third = seen
    for step, baseline in ((first, own["ops"]), (second, own["intern"]), (third, narrowed)):
        assert step.identity.path is ConstructionPath.SOP_STEP and step.identity.parent == "ops"
        assert without(step.describe(), "parent") == without(baseline.describe(), "parent")
        assert step.approvals.interactivity is Interactivity.NON_INTERACTIVE  # `orchestrator sop` off a TTY
    assert third.tools.names == ("arm__status", "file_read")  # http_fetch named by the step, never added
    assert third.assembly.caller_allowed == frozenset(NARROWING)
    assert "memory_store" in first.tools and "shell" in first.tools
    for step, request in zip(seen, fake_llm.requests, strict=True):
        assert request.get("tools", []) == list(step.tools.provider_specs())
        assert (request["model"], request["temperature"]) == (step.model.model, step.model.temperature)


async def test_delegate_from_orchestrator_agent_opens_what_the_target_needs(
    fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(
        parity_toml(fake_llm.base_url)
        + '\n[agents.lead]\nprovider = "fake"\nmodel = "lead-model"\nautonomy = "full"\n'
        'tools = ["delegate"]\ndelegates = ["ops"]\n'
    )
    fake_llm.script(tool_call("delegate", {"agent": "ops", "task": "t"}), text("ops ok"), text("done"))
    code = await asyncio.to_thread(cli.main, ["agent", "lead", "-m", "go", "--config", str(path)])
    assert (code, capsys.readouterr().out) == (0, "done\n")
    config = load_config(path)
    with MemoryStore(config.state_path() / "memory.sqlite3") as memory:
        own = resolve(config, "ops", path=ConstructionPath.CLI_RUN,
                      services=Services(memory=memory, peripherals=PeripheralPool()))
    _, ops = seen
    # the lead has no memory, yet its delegate gets its own memory tools (the store is opened for it)
    assert without(ops.describe(), "parent", "knobs") == without(own.describe(), "parent", "knobs")
    assert "memory_recall" in ops.tools and ops.approvals.interactivity is Interactivity.NON_INTERACTIVE
    assert fake_llm.requests[1].get("tools", []) == list(ops.tools.provider_specs())
