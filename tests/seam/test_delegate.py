"""The `delegate` tool, driven by a scripted model through `orchestrator agent` and the daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import cli
from orchestrator.policy import Interactivity
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, ScopedAssembly, Services, resolve
from orchestrator.store import AuditLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

SECRET = "SECRET-PARENT-CONTEXT-7731"


def delegation_toml(fake: FakeOpenAI, *, extra: str = "") -> str:
    return provider_toml(fake.base_url) + """
[daemon]
max_delegation_depth = 2

[agents.lead]
provider = "fake"
model = "lead-model"
system_prompt = "You are lead."
autonomy = "full"
tools = ["file_read", "file_write", "list_dir", "delegate"]
delegates = ["helper", "careful"]
[agents.lead.budget]
max_tool_iterations = 6
tool_timeout_s = 30

[agents.helper]
provider = "fake"
model = "helper-model"
system_prompt = "You are helper."
autonomy = "full"
tools = ["list_dir", "delegate"]
delegates = ["deep"]

[agents.deep]
provider = "fake"
model = "deep-model"
autonomy = "full"
tools = ["delegate"]
delegates = ["deeper"]

[agents.deeper]
provider = "fake"
model = "deeper-model"

[agents.careful]
provider = "fake"
model = "careful-model"
autonomy = "supervised"
tools = ["file_write"]

[agents.outsider]
provider = "fake"
model = "outsider-model"
autonomy = "full"
tools = ["file_write"]
""" + extra


async def run_agent(path: Path, agent: str, message: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    # `orchestrator agent` calls asyncio.run: run it off the test's loop
    code = await asyncio.to_thread(cli.main, ["agent", agent, "-m", message, "--config", str(path)])
    return code, capsys.readouterr().out


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_delegate_runs_the_target_under_its_own_narrower_policy(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    path = write_config(delegation_toml(fake_llm))
    fake_llm.script(
        tool_call("delegate", {"agent": "helper", "task": "List the workspace."}),
        tool_call("file_write", {"path": "x.txt", "content": "pwned"}),  # the parent has it; helper does not
        text("helper: nothing to list"),
        text("lead: done"),
    )
    code, out = await run_agent(path, "lead", f"{SECRET} please delegate", capsys)
    assert (code, out) == (0, "lead: done\n")
    lead, helper = seen
    assert (lead.identity.agent, lead.identity.path) == ("lead", ConstructionPath.CLI_RUN)
    assert (helper.identity.agent, helper.identity.path, helper.identity.parent) == (
        "helper", ConstructionPath.DELEGATE, "lead",
    )
    assert "file_write" in lead.tools and helper.tools.names == ("delegate", "list_dir")
    # the caller's remaining budgets cap the child: 6 iterations minus the one in flight, its tool timeout
    assert helper.knobs.max_tool_iterations == 5
    assert 0 < helper.knobs.turn_timeout_s <= 30 and helper.knobs.tool_timeout_s <= 30
    assert helper.knobs.max_history_messages == 40  # not a turn budget: the target's own
    assert helper.approvals.interactivity is Interactivity.NON_INTERACTIVE  # the caller surface's mode
    # what the providers were sent: the lead's delegate schema names only its delegates
    (spec,) = [t for t in fake_llm.requests[0]["tools"] if t["function"]["name"] == "delegate"]
    assert spec["function"]["parameters"]["properties"]["agent"]["enum"] == ["helper", "careful"]
    child_first, child_second, lead_again = fake_llm.requests[1:]
    assert child_first["model"] == "helper-model" and tool_names(child_first) == ["delegate", "list_dir"]
    assert child_first["messages"] == [
        {"role": "system", "content": "You are helper."},
        {"role": "user", "content": "List the workspace."},
    ]
    assert SECRET not in json.dumps(fake_llm.requests[1:3])  # the parent conversation never reaches it
    assert "not available to this agent" in tool_results(child_second)[0]
    assert not (tmp_path / "state-workspaces" / "helper" / "x.txt").exists()
    assert tool_results(lead_again) == ["helper: nothing to list"]


async def test_delegate_refuses_a_target_outside_delegates(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(delegation_toml(fake_llm))
    fake_llm.script(tool_call("delegate", {"agent": "outsider", "task": "write x"}), text("could not"))
    code, out = await run_agent(path, "lead", "go", capsys)
    assert (code, out) == (0, "could not\n")
    assert [e.identity.agent for e in seen] == ["lead"]
    assert len(fake_llm.requests) == 2  # outsider's model was never asked
    (result,) = tool_results(fake_llm.requests[1])
    assert result.startswith("Error: 'outsider' is not an agent lead may delegate to")


async def test_delegation_depth_is_limited(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(delegation_toml(fake_llm))
    fake_llm.script(
        tool_call("delegate", {"agent": "helper", "task": "t1"}),
        tool_call("delegate", {"agent": "deep", "task": "t2"}),
        tool_call("delegate", {"agent": "deeper", "task": "t3"}),  # depth 3 > max_delegation_depth 2
        text("deep did it alone"),
        text("helper relays: deep did it alone"),
        text("final"),
    )
    code, out = await run_agent(path, "lead", "go", capsys)
    assert (code, out) == (0, "final\n")
    assert [(e.identity.agent, e.identity.parent) for e in seen] == [
        ("lead", None), ("helper", "lead"), ("deep", "helper"),
    ]
    assert "deeper-model" not in [r["model"] for r in fake_llm.requests]
    (refusal,) = tool_results(fake_llm.requests[3])
    assert "delegation depth limit (2)" in refusal
    assert tool_results(fake_llm.requests[5]) == ["helper relays: deep did it alone"]
    # each level is capped by its caller's remaining iterations
    assert seen[2].knobs.max_tool_iterations == seen[1].knobs.max_tool_iterations - 1


def test_delegate_is_granted_only_by_name_with_delegates_and_filters_apply(
    load: Any, fake_llm: FakeOpenAI, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load(delegation_toml(fake_llm, extra="""
[agents.star]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["*"]
delegates = ["helper"]

[agents.star.http_fetch]
allowed_hosts = ["docs.example.com"]

[agents.excluded]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["delegate"]
excluded_tools = ["delegate"]
delegates = ["helper"]

[agents.reader]
provider = "fake"
model = "m"
autonomy = "read_only"
tools = ["list_dir", "delegate"]
delegates = ["helper"]
"""))
    services = Services()
    names = {a: resolve(config, a, path=ConstructionPath.CLI_RUN, services=services).tools.names
             for a in ("star", "excluded", "reader", "careful")}
    assert "delegate" not in names["star"]  # "*" is every built-in, not the delegation grant
    assert "delegate" not in names["excluded"] and names["reader"] == ("list_dir",)
    assert "delegate" not in names["careful"]
    narrowed = resolve(config, "lead", path=ConstructionPath.CLI_RUN, services=services,
                       assembly=ScopedAssembly(caller_allowed=frozenset({"list_dir"})))
    assert narrowed.tools.names == ("list_dir",)
    bad = write_config(provider_toml(fake_llm.base_url) + """
[agents.lonely]
provider = "fake"
model = "m"
tools = ["delegate"]
""")
    assert cli.main(["check", "--config", str(bad)]) == 1
    assert f"{bad}: agents.lonely.tools[0]: 'delegate' grants nothing without a non-empty delegates list" in (
        capsys.readouterr().err
    )


async def test_delegated_agent_asks_through_the_callers_channel_approver(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    route = '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n[[routes]]\nchannel = "term"\nagent = "lead"\nsenders = ["alice"]\n'
    path = write_config(delegation_toml(fake_llm, extra=route))
    fake_llm.script(
        tool_call("delegate", {"agent": "careful", "task": "write note.txt"}),
        tool_call("file_write", {"path": "note.txt", "content": "ok"}),  # careful is supervised: asks
        text("careful wrote it"),
        text("lead: careful wrote it"),
    )
    async with running(path) as (runtime, terms):
        term = terms["term"]
        term.type(f"{SECRET} delegate please")
        lines = await term.screen.wait_for(lambda ls: any('"note.txt"' in line for line in ls))
        request = next(line for line in lines if '"note.txt"' in line).split("]")[0].removeprefix("[approval ")
        term.type(f"/approve {request}")
        await term.screen.wait_for(lambda ls: "lead: careful wrote it" in ls)
        state = runtime.config.state_path()
    lead, careful = seen
    assert careful.identity.parent == "lead" and careful.identity.path is ConstructionPath.DELEGATE
    assert careful.approvals.interactivity is Interactivity.CHANNEL_PROMPT
    assert careful.tools.names == ("file_write",)
    assert (state.with_name("state-workspaces") / "careful" / "note.txt").read_text() == "ok"
    assert SECRET not in json.dumps(fake_llm.requests[1:3])
    with AuditLog(state / "audit.sqlite3") as audit:
        rows = audit.decisions(agent="careful")
    assert [(r["verdict"], r["decided_by"], r["tool"]) for r in rows] == [("approved", "term:alice", "file_write")]
