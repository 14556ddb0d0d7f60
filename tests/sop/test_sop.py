"""SOPs driven through `orchestrator sop`, `/sop` in a chat and `run_sop`, with a scripted model."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from channels import Inbound
from orchestrator import cli
from orchestrator.config import Config
from orchestrator.daemon import Disposition, process_message
from orchestrator.policy import (
    ApprovalDecision,
    ApprovalRequest,
    Interactivity,
    Verdict,
)
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services
from orchestrator.sessions import MemoryTranscripts, Sessions
from orchestrator.sop import SopStatus, UnknownSop, run_sop
from orchestrator.store import AuditLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

SECRET = "SECRET-CHAT-HISTORY-5521"


def _sessions() -> Sessions:
    return Sessions(transcripts=MemoryTranscripts(prefix="sop:"))


def sop_toml(fake: FakeOpenAI, *, extra: str = "") -> str:
    return provider_toml(fake.base_url) + """
[agents.lead]
provider = "fake"
model = "lead-model"
system_prompt = "You are lead."
autonomy = "full"
tools = ["file_read", "file_write", "list_dir"]

[agents.narrow]
provider = "fake"
model = "narrow-model"
system_prompt = "You are narrow."
autonomy = "full"
tools = ["list_dir"]

[sops.report]
agent = "lead"
[[sops.report.steps]]
prompt = "Gather the facts."
tools = ["list_dir", "file_read"]
[[sops.report.steps]]
prompt = "Write the report."
agent = "narrow"

[sops.guarded]
agent = "lead"
[[sops.guarded.steps]]
prompt = "Prepare."
[[sops.guarded.steps]]
prompt = "Deploy."
agent = "narrow"
requires_confirmation = true
""" + extra


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


async def test_cli_sop_step_runs_as_a_second_agent_with_its_narrower_policy(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    path = write_config(sop_toml(fake_llm))
    fake_llm.script(
        text("facts: A and B"),
        tool_call("file_write", {"path": "r.txt", "content": "x"}),  # lead has it; narrow does not
        text("report done"),
    )
    code = await asyncio.to_thread(cli.main, ["sop", "report", "-m", "ticket 42", "--config", str(path)])
    assert (code, capsys.readouterr().out) == (0, "report done\n")
    first, second = seen
    assert [(e.identity.agent, e.identity.path, e.identity.parent) for e in seen] == [
        ("lead", ConstructionPath.SOP_STEP, "lead"), ("narrow", ConstructionPath.SOP_STEP, "lead"),
    ]
    # step tools narrow (caller_allowed); the second step gets narrow's own registry, not lead's
    assert first.tools.names == ("file_read", "list_dir")
    assert first.assembly.caller_allowed == frozenset({"list_dir", "file_read"})
    assert second.tools.names == ("list_dir",) and second.assembly.caller_allowed is None
    assert tool_names(fake_llm.requests[0]) == ["file_read", "list_dir"]
    assert fake_llm.requests[0]["messages"][1]["content"] == (
        "Gather the facts.\n\nContext given when the procedure was started:\nticket 42"
    )
    step2 = fake_llm.requests[1]
    assert (step2["model"], tool_names(step2)) == ("narrow-model", ["list_dir"])
    assert step2["messages"] == [
        {"role": "system", "content": "You are narrow."},
        {"role": "user", "content": "Write the report.\n\nOutput of the previous step:\nfacts: A and B"},
    ]
    assert "ticket 42" not in json.dumps(fake_llm.requests[1:])  # only the previous step's output
    assert "not available to this agent" in fake_llm.requests[2]["messages"][-1]["content"]
    assert not (tmp_path / "state-workspaces" / "narrow" / "r.txt").exists()


async def test_confirmation_on_a_non_interactive_surface_stops_the_sop(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    path = write_config(sop_toml(fake_llm))
    fake_llm.script(text("prepared"))
    code = await asyncio.to_thread(cli.main, ["sop", "guarded", "--config", str(path)])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert "SOP 'guarded' step 2 (narrow) needs confirmation and nobody confirmed it" in captured.err
    assert [e.identity.agent for e in seen] == ["lead"] and len(fake_llm.requests) == 1
    with AuditLog(tmp_path / "state" / "audit.sqlite3") as audit:
        rows = audit.decisions(agent="narrow")
    assert [(r["tool"], r["verdict"], r["decided_by"]) for r in rows] == [("sop:guarded:step2", "no_decision", None)]


async def test_confirmation_is_asked_through_the_surfaces_approver(
    load: Any, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution], services: Services
) -> None:
    config = load(sop_toml(fake_llm))
    asked: list[ApprovalRequest] = []

    def approver(verdict: Verdict) -> Any:
        async def answer(request: ApprovalRequest) -> ApprovalDecision:
            asked.append(request)
            return ApprovalDecision(verdict=verdict, decided_by="test:op", reason="because")
        return answer

    fake_llm.script(text("prepared"), text("deployed"))
    result = await run_sop(
        config, "guarded", services=services, sessions=_sessions(), approver=approver(Verdict.APPROVED),
        interactivity=Interactivity.INTERACTIVE, session="s1",
    )
    assert (result.status, result.output) == (SopStatus.COMPLETED, "deployed")
    assert [(r.agent, r.tool, dict(r.arguments)) for r in asked] == [
        ("narrow", "sop:guarded:step2", {"agent": "narrow", "prompt": "Deploy."})
    ]
    assert seen[1].approvals.interactivity is Interactivity.INTERACTIVE
    fake_llm.script(text("prepared again"))
    refused = await run_sop(
        config, "guarded", services=services, sessions=_sessions(), approver=approver(Verdict.DENIED),
        interactivity=Interactivity.INTERACTIVE,
    )
    assert refused.status is SopStatus.STOPPED and "refused by test:op" in refused.message
    assert len(fake_llm.requests) == 3  # the refused step never reached its model
    with pytest.raises(UnknownSop):
        await run_sop(config, "nope", services=services, sessions=_sessions())


async def test_a_step_that_cannot_be_reassembled_fails_the_sop_closed(
    fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution], services: Services,
    write_config: WriteConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    toml = sop_toml(fake_llm, extra=f"""
[daemon]
state_dir = "{tmp_path / 'state'}"

[sops.broken]
agent = "lead"
[[sops.broken.steps]]
prompt = "First."
[[sops.broken.steps]]
prompt = "Second."
agent = "ghost"
[[sops.broken.steps]]
prompt = "Third."
""")
    # the config check refuses it ...
    bad = write_config(toml)
    assert cli.main(["check", "--config", str(bad)]) == 1
    assert f"{bad}: sops.broken.steps[1].agent: unknown agent 'ghost'" in capsys.readouterr().err
    # ... and a config that slipped past it (built in code) still fails closed at the step
    config = Config.model_validate(tomllib.loads(toml))
    fake_llm.script(text("first done"))
    result = await run_sop(config, "broken", services=services, sessions=_sessions())
    assert result.status is SopStatus.FAILED
    assert result.message.startswith("SOP 'broken' step 2 (ghost) cannot be assembled (unknown agent 'ghost'")
    assert [(s.index, s.status) for s in result.steps] == [(1, SopStatus.COMPLETED), (2, SopStatus.FAILED)]
    assert [e.identity.agent for e in seen] == ["lead"] and len(fake_llm.requests) == 1


async def test_sop_from_a_chat_asks_in_the_chat_and_never_sees_the_chat_history(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    # alice is the route's approver too: step 2 runs as `narrow`, not the routed agent
    route = (
        '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n[[routes]]\nchannel = "term"\nagent = "lead"\n'
        'senders = ["alice"]\napprovers = ["alice"]\nsops = ["guarded", "report"]\n'
    )
    path = write_config(sop_toml(fake_llm, extra=route))
    fake_llm.script(text("chat answer"), text("prepared"), text("deployed v2"))
    async with running(path) as (_, terms):
        term = terms["term"]
        term.type(f"{SECRET} remember this")
        await term.screen.wait_for(lambda ls: "chat answer" in ls)
        term.type("/sop nope")
        await term.screen.wait_for(lambda ls: "SOP 'nope' is not available here (available here: guarded, report)." in ls)
        term.type("/sop guarded release v2")
        lines = await term.screen.wait_for(lambda ls: any("sop:guarded:step2" in line for line in ls))
        request = next(line for line in lines if "sop:guarded:step2" in line).split("]")[0].removeprefix("[approval ")
        term.type(f"/approve {request}")
        await term.screen.wait_for(lambda ls: "deployed v2" in ls)
    chat, prepare, deploy = seen
    assert chat.identity.path is ConstructionPath.CHANNEL
    assert [(e.identity.agent, e.identity.parent, e.approvals.interactivity) for e in (prepare, deploy)] == [
        ("lead", "lead", Interactivity.CHANNEL_PROMPT), ("narrow", "lead", Interactivity.CHANNEL_PROMPT),
    ]
    assert SECRET not in json.dumps(fake_llm.requests[1:])
    assert fake_llm.requests[1]["messages"][1]["content"].endswith("release v2")


async def test_a_redelivered_sop_command_runs_once_and_one_sent_while_stopping_runs_after_restart(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    route = (
        '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n[[routes]]\nchannel = "term"\nagent = "lead"\n'
        'senders = ["alice"]\nsops = ["report"]\n'
    )
    path = write_config(sop_toml(fake_llm, extra=route))
    first = Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="/sop report q3", event_id="sop-1")
    late = Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="/sop report q4", event_id="sop-2")
    fake_llm.script(text("facts"), text("report q3"))
    async with running(path) as (runtime, terms):
        assert await process_message(runtime, first) is Disposition.COMMAND
        await terms["term"].screen.wait_for(lambda lines: "report q3" in lines)
        assert await process_message(runtime, first) is Disposition.DUPLICATE  # a platform redelivery
        runtime.stop_accepting()  # stopping: stored, left for the next start
        assert await process_message(runtime, late) is Disposition.NOT_ACCEPTING
    assert len(fake_llm.requests) == 2 and len(seen) == 2
    fake_llm.script(text("facts again"), text("report q4"))
    async with running(path) as (_, terms):
        await terms["term"].screen.wait_for(lambda lines: "report q4" in lines)
    assert len(fake_llm.requests) == 4
    assert fake_llm.requests[2]["messages"][1]["content"].endswith("q4")
