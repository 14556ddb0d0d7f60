"""The library API through its public surface: `orchestrator.Agent`, with the fake LLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import orchestrator
from orchestrator.checks import load_config
from orchestrator.engine import StopReason
from orchestrator.errors import UnknownAgent
from orchestrator.library import AgentClosed
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Interactivity, Verdict
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.gateway.kit import gateway_toml, write


def shell_then(reply: str) -> tuple[object, ...]:
    return tool_call("shell", {"argv": ["echo", "from-shell"]}), text(reply)


async def test_default_approver_denies_what_needs_approval(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    fake_llm.script(*shell_then("denied it"))
    async with orchestrator.Agent.from_config(write(tmp_path, gateway_toml(fake_llm.base_url)), "ops") as agent:
        result = await agent.run("run echo")
    assert (result.text, result.stop, result.executed) == ("denied it", StopReason.COMPLETED, ())
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.LIBRARY
    assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    first, second = fake_llm.requests
    assert first["tools"] == list(execution.tools.provider_specs())
    assert "arm__status" in execution.tools  # the library path withholds nothing the policy grants
    assert second["messages"][-1]["role"] == "tool" and "no operator decided" in second["messages"][-1]["content"]


async def test_supplied_approver_makes_the_turn_interactive_and_decides(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    asked: list[ApprovalRequest] = []

    async def approve_echo(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        ok = list(request.arguments["argv"]) == ["echo", "from-shell"]
        return ApprovalDecision(verdict=Verdict.APPROVED if ok else Verdict.DENIED, decided_by="lib:test", reason="rule")

    path = write(tmp_path, gateway_toml(fake_llm.base_url))
    fake_llm.script(*shell_then("it ran"))
    async with orchestrator.Agent.from_config(path, "ops", approver=approve_echo) as agent:
        result = await agent.run("run echo")
    assert (result.text, result.executed) == ("it ran", ("shell",))
    assert [(r.agent, r.tool) for r in asked] == [("ops", "shell")]
    assert seen[-1].approvals.interactivity is Interactivity.INTERACTIVE
    assert "from-shell" in fake_llm.requests[1]["messages"][-1]["content"]  # the real output

    # a plain function answering False refuses: the model is told who refused
    fake_llm.script(*shell_then("refused"))
    agent = orchestrator.Agent.from_config(load_config(path), "ops", approver=lambda request: False)
    try:
        result = await agent.run("run echo")
    finally:
        await agent.aclose()
    assert (result.text, result.executed) == ("refused", ())
    assert "refused by library" in fake_llm.requests[3]["messages"][-1]["content"]
    with pytest.raises(AgentClosed):
        await agent.run("again")


async def test_sessions_are_separate_transcripts(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(text("a1"), text("b1"), text("a2"))
    async with orchestrator.Agent.from_config(write(tmp_path, gateway_toml(fake_llm.base_url)), "intern") as agent:
        assert (await agent.run("first in a", session="a")).text == "a1"
        assert (await agent.run("first in b", session="b")).text == "b1"
        assert (await agent.run("second in a", session="a")).text == "a2"
    users = [[m["content"] for m in r["messages"] if m["role"] == "user"] for r in fake_llm.requests]
    assert users == [["first in a"], ["first in b"], ["first in a", "second in a"]]


async def test_unknown_agent_fails_at_from_config(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    with pytest.raises(UnknownAgent, match="'nobody'"):
        orchestrator.Agent.from_config(write(tmp_path, gateway_toml(fake_llm.base_url)), "nobody")


def test_import_orchestrator_stays_light() -> None:
    code = (
        "import sys, orchestrator; "
        "heavy = [m for m in ('orchestrator.library', 'orchestrator.engine', 'openai', 'aiohttp') if m in sys.modules]; "
        "print(heavy); orchestrator.Agent; print('orchestrator.library' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]
