"""`orchestrator acp` through its real entry point: a subprocess driven over stdio by an ACP client."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.acp.harness import RecordingClient, acp_agent, initialize, prompt
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, cut_off, paced, status, text, tool_call
from tests.mcp.kit import stdio_kit

pytestmark = pytest.mark.slow

MEMORY_TOOLS = {"memory_store", "memory_recall", "memory_forget"}


def dev_toml(base_url: str, *, acp_enable_mcp: bool = False) -> str:
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

{stdio_kit()}
[mcp.bundles.kitb]
servers = ["kit"]
tools = {{ kit = ["echo"] }}

[agents.dev]
provider = "fake"
model = "dev-model"
temperature = 0.2
system_prompt = "You are dev."
autonomy = "supervised"
tools = ["file_read", "shell"]
mcp_bundles = ["kitb"]
acp_enable_mcp = {"true" if acp_enable_mcp else "false"}

[agents.dev.approval]
auto_approve = ["file_read"]

[agents.dev.memory]
scope = "agent"

[agents.dev.shell]
allowed_commands = ["echo"]
"""


def tool_names(request: dict[str, object]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]  # type: ignore[index,attr-defined]


async def test_initialize_new_session_and_a_streamed_reply(fake_llm: FakeOpenAI, write_config: WriteConfig) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(text("hello from dev"), text("second answer"))
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        init = await initialize(conn)
        assert init.agent_info is not None and init.agent_info.title == "orchestrator: dev"
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("hi"))
        assert done.stop_reason == "end_turn"
        assert set(client.kinds()) == {"agent_message_chunk"} and client.reply() == "hello from dev"
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("and now?"))
        assert client.reply() == "hello from devsecond answer"
    first, second = fake_llm.requests
    # fast boot: no memory tools (exclude_memory) and no MCP tools (connect_mcp=False)
    assert tool_names(first) == ["file_read", "shell"]
    assert (first["model"], first["temperature"]) == ("dev-model", 0.2)
    assert first["messages"] == [{"role": "system", "content": "You are dev."}, {"role": "user", "content": "hi"}]
    # the session keeps its transcript between prompts
    assert [m["content"] for m in second["messages"][1:]] == ["hi", "hello from dev", "and now?"]


async def test_the_reply_streams_as_several_chunks_in_order_and_is_not_sent_again(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(paced(text("one two three four five"), over_s=1.0), text("ok"))
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("count"))
        first_turn = list(client.updates)
        await conn.prompt(session_id=session.session_id, prompt=prompt("again"))
    assert done.stop_reason == "end_turn"
    # one update per streamed piece (a piece holds what one network read brought: the model
    # wrote over a second, so several), in order, and nothing after them (no whole-text repeat)
    assert {u.session_update for u in first_turn} == {"agent_message_chunk"}
    pieces = [u.content.text for u in first_turn]
    assert "".join(pieces) == "one two three four five" and len(pieces) > 1 and all(pieces)
    assert fake_llm.requests[0]["stream"] is True
    # the transcript keeps the assembled answer, not the pieces
    assert fake_llm.requests[1]["messages"][-2] == {"role": "assistant", "content": "one two three four five"}


async def test_a_tool_call_is_reported_and_then_the_final_answer_streams(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    arguments = '{"argv": ["echo", "streamed-arguments-run"]}'
    fake_llm.script(
        tool_call("shell", arguments, id="call_s", content="Let me check."), text("It printed the words.")
    )
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("run it"))
    assert done.stop_reason == "end_turn"
    # the text before the call streams too, then the call is reported, then the answer streams
    chunk = "agent_message_chunk"
    kinds = client.kinds()
    assert [kind for kind in kinds if kind != chunk] == ["tool_call", "tool_call_update"]
    call_at = kinds.index("tool_call")
    assert kinds[0] == chunk and kinds[call_at + 2:] and set(kinds[call_at + 2:]) == {chunk}
    before = "".join(u.content.text for u in client.updates[:call_at])
    after = "".join(u.content.text for u in client.updates[call_at + 2:])
    assert (before, after) == ("Let me check.", "It printed the words.")
    start, finish = client.updates[call_at:call_at + 2]
    assert (start.tool_call_id, start.raw_input) == ("call_s", {"argv": ["echo", "streamed-arguments-run"]})
    assert (finish.tool_call_id, finish.status) == ("call_s", "completed")
    assert "streamed-arguments-run" in finish.raw_output
    # the call was assembled from its streamed pieces exactly as the model sent it
    [call] = fake_llm.requests[1]["messages"][-2]["tool_calls"]
    assert (call["id"], call["function"]["name"], call["function"]["arguments"]) == ("call_s", "shell", arguments)


async def test_a_stop_message_the_engine_wrote_is_sent_once(fake_llm: FakeOpenAI, write_config: WriteConfig) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(status(400, message="unknown model 'dev-model'"), cut_off(text("half an answer"), after=2))
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        refused = await conn.prompt(session_id=session.session_id, prompt=prompt("hi"))
        refused_updates = list(client.updates)
        broken = await conn.prompt(session_id=session.session_id, prompt=prompt("again"))
    assert (refused.stop_reason, broken.stop_reason) == ("end_turn", "end_turn")
    # nothing streamed: the engine's message arrives as one chunk
    [message] = refused_updates
    assert message.session_update == "agent_message_chunk"
    # the provider's detail (its URL, its error body) stays in the log, behind an incident id
    assert message.content.text.startswith("Sorry, the model provider failed (incident ")
    assert "unknown model" not in message.content.text and fake_llm.base_url not in message.content.text
    # a stream cut off mid-answer: the piece that arrived, then the engine's message on its own
    piece, stop = client.updates[1:]
    assert piece.content.text == "half"
    assert stop.content.text.startswith("\n\nSorry, the model provider failed (incident ")


async def test_approval_through_request_permission_allow_and_reject(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(
        tool_call("shell", {"argv": ["echo", "allowed-run"]}, id="call_a"), text("ran it"),
        tool_call("shell", {"argv": ["echo", "refused-run"]}, id="call_b"), text("did not run it"),
    )
    answers = iter(["allow", "reject"])
    client = RecordingClient(answer=lambda call, options: next(answers))
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        allowed = await conn.prompt(session_id=session.session_id, prompt=prompt("run echo"))
        allowed_updates = list(client.updates)
        refused = await conn.prompt(session_id=session.session_id, prompt=prompt("again"))
    assert (allowed.stop_reason, refused.stop_reason) == ("end_turn", "end_turn")
    # the permission request names the tool call the client was told about, with allow/reject
    (call_a, options), (call_b, _) = client.permissions
    assert (call_a.tool_call_id, call_a.title, call_a.raw_input) == ("call_a", "shell", {"argv": ["echo", "allowed-run"]})
    assert call_b.tool_call_id == "call_b"
    assert [(o.option_id, o.kind) for o in options] == [("allow", "allow_once"), ("reject", "reject_once")]
    # the tool call is streamed: started (pending), then finished
    start, finish, *message = allowed_updates
    assert (start.session_update, start.tool_call_id, start.status) == ("tool_call", "call_a", "pending")
    assert (finish.session_update, finish.tool_call_id, finish.status) == ("tool_call_update", "call_a", "completed")
    assert "allowed-run" in finish.raw_output
    assert {m.session_update for m in message} == {"agent_message_chunk"}
    assert "".join(m.content.text for m in message) == "ran it"
    rejected = [u for u in client.updates[3:] if u.session_update == "tool_call_update"]
    assert [(u.tool_call_id, u.status) for u in rejected] == [("call_b", "failed")]
    # what the model was told: the output when allowed, a refusal naming the client when rejected
    ran, refusal = fake_llm.requests[1]["messages"][-1], fake_llm.requests[3]["messages"][-1]
    assert ran["role"] == "tool" and "allowed-run" in ran["content"]
    assert refusal["content"].startswith("Tool call 'shell' was refused by acp:")
    assert "refused-run" not in refusal["content"]  # echo never ran
    # both decisions are audited with who decided
    with sqlite3.connect(config.parent / "state" / "audit.sqlite3") as db:
        rows = db.execute("SELECT tool, verdict, decided_by FROM approval_audit ORDER BY id").fetchall()
    assert [(t, v) for t, v, _ in rows] == [("shell", "approved"), ("shell", "denied")]
    assert all(who.startswith("acp:") for _, _, who in rows)


async def test_cancel_during_a_slow_model_call_ends_the_prompt_cancelled(write_config: WriteConfig) -> None:
    async with FakeOpenAI(default=None, latency_s=30) as slow:
        config = write_config(dev_toml(slow.base_url))
        slow.script(text("too late"), text("after the cancel"))
        client = RecordingClient()
        async with acp_agent(config, "dev", client) as (conn, _):
            await initialize(conn)
            session = await conn.new_session(cwd=str(config.parent))
            running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=prompt("slow one")))
            await _until(lambda: len(slow.requests) == 1)
            await conn.cancel(session_id=session.session_id)
            done = await asyncio.wait_for(running, 10)
            assert done.stop_reason == "cancelled"
            assert client.reply() == ""  # the late answer never reached the client
            slow.latency_s = 0
            again = await conn.prompt(session_id=session.session_id, prompt=prompt("quick one"))
            assert again.stop_reason == "end_turn"
        # the session survived the cancellation; the cut-off turn left only its user message
        assert [m["content"] for m in slow.requests[1]["messages"][1:]] == ["slow one", "quick one"]


async def test_cancel_while_approval_is_pending_closes_the_tool_call(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(tool_call("shell", {"argv": ["echo", "never"]}, id="call_c"), text("next turn"))
    client = RecordingClient(answer=lambda call, options: None)  # hold the request until cancelled
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=prompt("run it")))
        await asyncio.wait_for(client.asked.wait(), 10)
        await conn.cancel(session_id=session.session_id)
        client.cancelled.set()
        assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
        assert [(u.tool_call_id, u.status) for u in client.updates if u.session_update == "tool_call_update"] == [
            ("call_c", "failed")
        ]
        await conn.prompt(session_id=session.session_id, prompt=prompt("next"))
    # the engine answered the open call, so the next request is a well-formed transcript
    messages = fake_llm.requests[1]["messages"]
    assert messages[-2] == {
        "role": "tool", "tool_call_id": "call_c", "content": "Error: not run: the turn was cancelled.",
    }
    assert messages[-1] == {"role": "user", "content": "next"}


async def test_acp_enable_mcp_connects_the_agents_bundles(fake_llm: FakeOpenAI, write_config: WriteConfig) -> None:
    config = write_config(dev_toml(fake_llm.base_url, acp_enable_mcp=True))
    fake_llm.script(text("with mcp"))
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        await conn.prompt(session_id=session.session_id, prompt=prompt("hi"))
    names = tool_names(fake_llm.requests[0])
    assert names == ["file_read", "kit__echo", "shell"]  # the bundle's grant, still no memory tools
    assert not MEMORY_TOOLS & set(names)


async def test_logs_go_to_stderr_and_an_unknown_agent_fails_before_the_protocol(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(dev_toml(fake_llm.base_url))
    fake_llm.script(text("verbose but clean"))
    client = RecordingClient()
    async with acp_agent(config, "dev", client, "-v") as (conn, process):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("hi"))
        assert (done.stop_reason, client.reply()) == ("end_turn", "verbose but clean")
    assert process.stderr is not None
    assert "DEBUG" in (await process.stderr.read()).decode()  # debug logs flowed, on stderr only
    bad = await asyncio.create_subprocess_exec(
        *_cli("acp", "--agent", "ghost", "--config", str(config)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(bad.communicate(), 20)
    assert (bad.returncode, out) == (1, b"")
    assert "unknown agent 'ghost'" in err.decode()


def _cli(*args: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "orchestrator.cli", *args]


async def _until(condition: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)
