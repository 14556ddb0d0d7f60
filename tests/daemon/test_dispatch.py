"""process_message through a running Runtime: routing, sessions, commands, approvals, restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from loguru import logger

import pytest

from channels import ApprovalAnswer, Inbound
from orchestrator.daemon import Disposition, answer_approval, deliver, process_message
from orchestrator.policy import render_arguments
from orchestrator.store import AuditLog
from orchestrator.tools import BUILTIN_TOOLS
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call

pytestmark = pytest.mark.slow


def daemon_toml(fake: FakeOpenAI, *, agent_extra: str = "", routes: str | None = None) -> str:
    return (
        provider_toml(fake.base_url)
        + '[agents.helper]\nprovider = "fake"\nmodel = "m"\ntools = ["file_write", "list_dir"]\n'
        + agent_extra
        + '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n'
        + (routes if routes is not None else '\n[[routes]]\nchannel = "term"\nagent = "helper"\nsenders = ["alice"]\n')
    )


def contents(fake: FakeOpenAI, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index]["messages"] if m["role"] in ("user", "assistant")]


async def test_message_in_reply_out_with_history(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.script(text("hi alice"), text("second answer"))
    async with running(path) as (_, terms):
        term = terms["term"]
        term.type("hello")
        await term.screen.wait_for(lambda lines: "hi alice" in lines)
        term.type("and again")
        await term.screen.wait_for(lambda lines: "second answer" in lines)
    assert contents(fake_llm, 1) == ["hello", "hi alice", "and again"]


async def test_a_failed_turns_apology_is_never_sent_back_to_the_model(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.script(status(500), text("back again"))
    async with running(path) as (_, terms):
        term = terms["term"]
        term.type("first try")
        lines = await term.screen.wait_for(lambda lines: any("provider failed" in line for line in lines))
        [apology] = [line for line in lines if "provider failed" in line]
        term.type("second try")
        await term.screen.wait_for(lambda lines: "back again" in lines)
    # the user's failed message stays in the history; the apology was never the model's words
    assert contents(fake_llm, 1) == ["first try", "second try"]
    assert "Sorry" not in str(fake_llm.requests[1]["messages"]) and apology not in str(fake_llm.requests)


async def test_unrouted_and_unlisted_senders_are_ignored(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    routes = '\n[[routes]]\nchannel = "term"\nagent = "helper"\nchat = "elsewhere"\nsenders = ["*"]\n'
    path = write_config(daemon_toml(fake_llm, routes=routes))
    async with running(path) as (runtime, _):
        inbound = Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="hi", event_id="e1")
        assert await process_message(runtime, inbound) is Disposition.NO_ROUTE
    path = write_config(daemon_toml(fake_llm))
    async with running(path) as (runtime, _):
        stranger = Inbound(is_direct=True, channel="term", chat="terminal", sender="mallory", text="hi", event_id="e2")
        assert await process_message(runtime, stranger) is Disposition.NO_ROUTE
    assert fake_llm.requests == []


async def test_redelivered_event_is_processed_once(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.script(text("once"))
    inbound = Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="hi", event_id="same")
    async with running(path) as (runtime, terms):
        assert await process_message(runtime, inbound) is Disposition.ANSWERED
        assert await process_message(runtime, inbound) is Disposition.DUPLICATE
    async with running(path) as (runtime, _):  # and after a restart
        assert await process_message(runtime, inbound) is Disposition.DUPLICATE
    assert len(fake_llm.requests) == 1


async def test_messages_in_one_session_are_answered_in_order(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.latency_s = 0.2
    fake_llm.script(text("answer 1"), text("answer 2"), text("answer 3"))
    async with running(path) as (_, terms):
        term = terms["term"]
        for i in (1, 2, 3):
            term.type(f"question {i}")
        lines = await term.screen.wait_for(lambda lines: "answer 3" in lines)
    assert [line for line in lines if line.startswith("answer")] == ["answer 1", "answer 2", "answer 3"]
    assert contents(fake_llm, 2) == ["question 1", "answer 1", "question 2", "answer 2", "question 3"]


async def test_stop_and_new(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.latency_s = 5
    async with running(path) as (_, terms):
        term = terms["term"]
        term.type("slow question")
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        term.type("/stop")
        await term.screen.wait_for(lambda lines: "Stopped." in lines)
        fake_llm.latency_s = 0
        term.type("/new")
        await term.screen.wait_for(lambda lines: "Started a new session." in lines)
        fake_llm.script(text("fresh"))
        term.type("after new")
        await term.screen.wait_for(lambda lines: "fresh" in lines)
    assert contents(fake_llm, -1) == ["after new"]


async def test_in_channel_approval_approve_deny_outsider_and_timeout(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    extra = '[agents.helper.approval]\ntimeout_s = 1.5\n'
    path = write_config(daemon_toml(fake_llm, agent_extra=extra))
    async with running(path) as (runtime, terms):
        term = terms["term"]
        state = Path(runtime.config.state_path())
        workspace = state.with_name("state-workspaces") / "helper"

        async def ask(file: str) -> str:
            fake_llm.script(tool_call("file_write", {"path": file, "content": "x"}), text(f"done {file}"))
            term.type(f"write {file}")
            lines = await term.screen.wait_for(lambda ls: any(f'"{file}"' in line for line in ls))
            prompt = next(line for line in lines if f'"{file}"' in line)
            return prompt.split("]")[0].removeprefix("[approval ")

        request = await ask("a.txt")
        # someone else answering is refused
        await answer_approval(runtime.approvals, runtime.channels, ApprovalAnswer(channel="term", request_id=request, sender="mallory", approved=True, chat="terminal"))
        assert "Only the person who asked" in term.screen.lines[-1]
        term.type(f"/approve {request}")
        await term.screen.wait_for(lambda ls: "done a.txt" in ls)
        assert (workspace / "a.txt").exists()
        request = await ask("b.txt")
        term.type(f"/deny {request}")
        await term.screen.wait_for(lambda ls: "done b.txt" in ls)
        await ask("c.txt")
        await term.screen.wait_for(lambda ls: "done c.txt" in ls)
        await term.screen.wait_for(lambda ls: any("in time: it was not run" in line for line in ls))
    assert not (workspace / "b.txt").exists() and not (workspace / "c.txt").exists()
    with AuditLog(state / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="helper")]
    assert decided == [("approved", "term:alice"), ("denied", "term:alice"), ("no_decision", None)]


async def test_restart_replays_pending_and_closes_interrupted(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.latency_s = 30
    async with running(path) as (runtime, terms):
        terms["term"].type("first, interrupted")
        terms["term"].type("second, still queued")
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        while len(runtime.store.unfinished()) < 2:
            await asyncio.sleep(0.01)
    # the runtime closed mid-turn: one turn interrupted, one message never started
    fake_llm.latency_s = 0
    fake_llm.script(text("answer to the second"))
    async with running(path) as (_, terms):
        lines = await terms["term"].screen.wait_for(lambda ls: "answer to the second" in ls)
    assert any('restarted while answering "first, interrupted"' in line for line in lines)
    assert contents(fake_llm, -1)[-1] == "second, still queued"


async def test_long_sessions_keep_only_the_window_in_memory(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    extra = "[agents.helper.budget]\nmax_history_messages = 3\n"
    path = write_config(daemon_toml(fake_llm, agent_extra=extra))
    async with running(path) as (runtime, terms):
        for i in range(4):
            fake_llm.script(text(f"answer {i}"))
            terms["term"].type(f"question {i}")
            await terms["term"].screen.wait_for(lambda lines, i=i: f"answer {i}" in lines)
        (entry,) = runtime.transcripts.cached()
        assert len(entry.transcript.messages) == 3 and entry.transcript.total == 8
        stored, total = runtime.store.load_messages(entry.session_id)
    assert total == 8 and [m["content"] for m in stored][-2:] == ["question 3", "answer 3"]
    assert contents(fake_llm, 3) == ["question 2", "answer 2", "question 3"]
    fake_llm.script(text("after restart"))
    async with running(path) as (_, terms):  # a restart loads only the tail
        terms["term"].type("question 4")
        await terms["term"].screen.wait_for(lambda lines: "after restart" in lines)
    assert contents(fake_llm, 4) == ["question 3", "answer 3", "question 4"]


async def test_messages_during_shutdown_are_kept_for_the_next_start(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    path = write_config(daemon_toml(fake_llm))
    late = Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="arrived while stopping", event_id="late")
    async with running(path) as (runtime, _):
        runtime.stop_accepting()
        assert await process_message(runtime, late) is Disposition.NOT_ACCEPTING
    assert fake_llm.requests == []
    fake_llm.script(text("answered after restart"))
    async with running(path) as (_, terms):
        await terms["term"].screen.wait_for(lambda lines: "answered after restart" in lines)
    assert contents(fake_llm, 0) == ["arrived while stopping"]


async def test_each_answered_turn_is_one_log_line_without_the_message_text(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    records: list[dict[str, Any]] = []
    sink = logger.add(lambda message: records.append(message.record), level="INFO")
    try:
        path = write_config(daemon_toml(fake_llm, agent_extra='[agents.helper.approval]\nauto_approve = ["list_dir"]\n'))
        fake_llm.script(tool_call("list_dir", {"path": "."}), text("all listed"))
        async with running(path) as (_, terms):
            terms["term"].type("my secret question")
            await terms["term"].screen.wait_for(lambda lines: "all listed" in lines)
    finally:
        logger.remove(sink)
    (turn,) = [r for r in records if r["message"].startswith("turn ")]
    assert {k: turn["extra"][k] for k in ("channel", "chat", "sender", "agent", "stop", "tools")} == {
        "channel": "term", "chat": "terminal", "sender": "alice", "agent": "helper", "stop": "completed",
        "tools": "list_dir",
    }
    assert turn["message"].startswith("turn term:terminal from alice by helper: completed in ")
    assert all("my secret question" not in r["message"] for r in records)


async def test_a_burst_beyond_the_session_queue_is_answered_busy_and_never_run(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    path = write_config(daemon_toml(fake_llm).replace("[agents.helper]", "[daemon]\nmax_queued_per_session = 2\n\n[agents.helper]"))
    fake_llm.latency_s = 0.2  # the first turn is still running while the burst arrives
    fake_llm.script(*(text(f"answer {i}") for i in range(3)))
    burst = [Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text=f"q{i}", event_id=f"b{i}") for i in range(5)]
    async with running(path) as (runtime, terms):
        for inbound in burst:  # as an adapter delivers: each admitted before any turn starts
            await deliver(runtime, inbound)
        lines = await terms["term"].screen.wait_for(lambda ls: "answer 2" in ls)
        busy = [line for line in lines if line.startswith("I still have 2 of your messages to answer")]
        assert len(busy) == 2  # q3 and q4
        assert await process_message(runtime, burst[3]) is Disposition.DUPLICATE  # done, not pending
        await asyncio.sleep(0.3)
    assert [contents(fake_llm, i)[-1] for i in range(3)] == ["q0", "q1", "q2"]
    assert len(fake_llm.requests) == 3


async def test_terminal_approval_prompt_shows_the_path_despite_a_long_first_argument(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    arguments = {"content": "A" * 5000, "path": "hidden.txt"}
    shown = render_arguments(arguments, BUILTIN_TOOLS["file_write"].spec.parameters)
    path = write_config(daemon_toml(fake_llm))
    async with running(path) as (_, terms):
        term = terms["term"]
        fake_llm.script(tool_call("file_write", arguments), text("finished hidden.txt"))
        term.type("write it")
        lines = await term.screen.wait_for(lambda ls: any(line.startswith("[approval ") for line in ls))
        prompt = next(line for line in lines if line.startswith("[approval "))
        term.type(f"/deny {prompt.split(']')[0].removeprefix('[approval ')}")
        await term.screen.wait_for(lambda ls: "finished hidden.txt" in ls)
    assert prompt.endswith(f"] file_write {shown}")
    assert '"path": "hidden.txt"' in prompt and "chars cut]…" in prompt
