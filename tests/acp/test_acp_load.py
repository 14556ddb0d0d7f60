"""`session/load`: ACP sessions stored in `sessions.sqlite3` and resumed by a later `orchestrator acp`."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.acp.harness import RecordingClient, acp_agent, initialize, prompt
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

pytestmark = pytest.mark.slow

UNKNOWN_ID = "0123456789abcdef0123456789abcdef"


def two_agents_toml(base_url: str, *, state_dir: str = "state") -> str:
    return f"""
[daemon]
state_dir = "{state_dir}"

[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.dev]
provider = "fake"
model = "dev-model"
system_prompt = "You are dev."
autonomy = "supervised"
tools = ["shell"]

[agents.dev.approval]
auto_approve = ["shell"]

[agents.dev.shell]
allowed_commands = ["echo"]

[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "You are ops."

[agents.ops.budget]
max_history_messages = 3
"""


def shown(updates: list[Any]) -> list[tuple[str, str]]:
    """Each update as (kind, text): message chunks by their text, tool calls by id and status."""
    rows = []
    for u in updates:
        if u.session_update == "tool_call":
            rows.append((u.session_update, f"{u.tool_call_id}:{u.status}"))
        else:
            rows.append((u.session_update, u.content.text))
    return rows


async def test_a_new_process_replays_a_stored_session_and_continues_with_its_history(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(two_agents_toml(fake_llm.base_url))
    fake_llm.script(
        text("hello there"),
        tool_call("shell", {"argv": ["echo", "replayed-output"]}, id="call_r"),
        text("it printed"),
        text("we talked before"),
    )
    async with acp_agent(config, "dev", RecordingClient()) as (conn, _):
        await initialize(conn)
        session_id = (await conn.new_session(cwd=str(config.parent))).session_id
        await conn.prompt(session_id=session_id, prompt=prompt("hi"))
        await conn.prompt(session_id=session_id, prompt=prompt("run echo"))
    earlier = fake_llm.requests[2]["messages"][1:]  # the first process's transcript before its last answer
    assert [m["role"] for m in earlier] == ["user", "assistant", "user", "assistant", "tool"]

    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, _):
        init = await initialize(conn)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        loaded = await conn.load_session(cwd=str(config.parent), session_id=session_id)
        replayed = list(client.updates)
        done = await conn.prompt(session_id=session_id, prompt=prompt("remember?"))
    assert loaded is not None
    # the whole conversation came back, in order, before session/load answered
    assert shown(replayed) == [
        ("user_message_chunk", "hi"),
        ("agent_message_chunk", "hello there"),
        ("user_message_chunk", "run echo"),
        ("tool_call", "call_r:completed"),
        ("agent_message_chunk", "it printed"),
    ]
    call = replayed[3]
    assert (call.title, call.raw_input) == ("shell", {"argv": ["echo", "replayed-output"]})
    assert "replayed-output" in call.content[0].content.text
    # the next prompt's request carries the restored history, exactly as the first process had it
    answer = client.updates[len(replayed):]
    assert done.stop_reason == "end_turn" and "".join(u.content.text for u in answer) == "we talked before"
    last = fake_llm.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You are dev."}
    assert last[1:] == [
        *earlier,
        {"role": "assistant", "content": "it printed"},
        {"role": "user", "content": "remember?"},
    ]
    with sqlite3.connect(config.parent / "state" / "sessions.sqlite3") as db:
        rows = db.execute("SELECT key, agent FROM sessions").fetchall()
        (count,) = db.execute("SELECT COUNT(*) FROM messages").fetchone()
    assert rows == [(f"acp:dev:{session_id}", "dev")]  # one stored session, extended in place
    assert count == 8


async def test_a_cancelled_turn_is_stored_too(write_config: WriteConfig) -> None:
    async with FakeOpenAI(default=None, latency_s=30) as slow:
        config = write_config(two_agents_toml(slow.base_url))
        slow.script(text("too late"), text("after the restart"))
        async with acp_agent(config, "dev", RecordingClient()) as (conn, _):
            await initialize(conn)
            session_id = (await conn.new_session(cwd=str(config.parent))).session_id
            running = asyncio.create_task(conn.prompt(session_id=session_id, prompt=prompt("slow one")))
            async with asyncio.timeout(10):
                while not slow.requests:
                    await asyncio.sleep(0.01)
            await conn.cancel(session_id=session_id)
            assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
        slow.latency_s = 0
        client = RecordingClient()
        async with acp_agent(config, "dev", client) as (conn, _):
            await initialize(conn)
            await conn.load_session(cwd=str(config.parent), session_id=session_id)
            assert shown(client.updates) == [("user_message_chunk", "slow one")]
            await conn.prompt(session_id=session_id, prompt=prompt("quick one"))
    assert [m["content"] for m in slow.requests[-1]["messages"][1:]] == ["slow one", "quick one"]


async def test_the_whole_conversation_is_replayed_but_only_the_history_window_is_sent(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(two_agents_toml(fake_llm.base_url))  # ops keeps 3 messages of history
    fake_llm.script(text("A"), text("B"), text("C"))
    async with acp_agent(config, "ops", RecordingClient()) as (conn, _):
        await initialize(conn)
        session_id = (await conn.new_session(cwd=str(config.parent))).session_id
        await conn.prompt(session_id=session_id, prompt=prompt("a"))
        await conn.prompt(session_id=session_id, prompt=prompt("b"))
    client = RecordingClient()
    async with acp_agent(config, "ops", client) as (conn, _):
        await initialize(conn)
        await conn.load_session(cwd=str(config.parent), session_id=session_id)
        assert [text for _, text in shown(client.updates)] == ["a", "A", "b", "B"]
        await conn.prompt(session_id=session_id, prompt=prompt("c"))
    assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == ["b", "B", "c"]


async def test_loading_an_unknown_session_is_an_error_and_the_process_keeps_serving(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = write_config(two_agents_toml(fake_llm.base_url))
    fake_llm.script(text("still here"))
    client = RecordingClient()
    async with acp_agent(config, "dev", client) as (conn, process):
        await initialize(conn)
        for bad in (UNKNOWN_ID, "not-an-id"):
            with pytest.raises(RequestError) as caught:
                await conn.load_session(cwd=str(config.parent), session_id=bad)
            assert caught.value.code == -32602  # invalid params
            assert caught.value.data == {"sessionId": f"no stored session {bad!r} for agent 'dev'"}
        assert client.updates == []  # nothing replayed
        session_id = (await conn.new_session(cwd=str(config.parent))).session_id
        done = await conn.prompt(session_id=session_id, prompt=prompt("hi"))
        assert (done.stop_reason, client.reply()) == ("end_turn", "still here")
        assert process.returncode is None


async def test_another_agent_cannot_load_a_session(fake_llm: FakeOpenAI, write_config: WriteConfig) -> None:
    config = write_config(two_agents_toml(fake_llm.base_url))
    fake_llm.script(text("dev's secret"), text("ops fresh"))
    async with acp_agent(config, "dev", RecordingClient()) as (conn, _):
        await initialize(conn)
        session_id = (await conn.new_session(cwd=str(config.parent))).session_id
        await conn.prompt(session_id=session_id, prompt=prompt("tell ops nothing"))

    ops_client = RecordingClient()
    async with acp_agent(config, "ops", ops_client) as (conn, _):
        await initialize(conn)
        with pytest.raises(RequestError) as caught:
            await conn.load_session(cwd=str(config.parent), session_id=session_id)
        assert caught.value.code == -32602
        assert caught.value.data == {"sessionId": f"no stored session {session_id!r} for agent 'ops'"}
        assert ops_client.updates == []
        fresh = (await conn.new_session(cwd=str(config.parent))).session_id
        await conn.prompt(session_id=fresh, prompt=prompt("hello"))
    # ops's own session starts empty: nothing of dev's conversation reached its model
    assert fake_llm.requests[-1]["messages"][1:] == [{"role": "user", "content": "hello"}]

    dev_client = RecordingClient()  # the id itself is fine: its own agent still loads it
    async with acp_agent(config, "dev", dev_client) as (conn, _):
        await initialize(conn)
        await conn.load_session(cwd=str(config.parent), session_id=session_id)
    assert shown(dev_client.updates) == [
        ("user_message_chunk", "tell ops nothing"), ("agent_message_chunk", "dev's secret"),
    ]


@pytest.mark.parametrize("argv", [["acp", "--agent", "dev"], ["run"]])
def test_an_unwritable_state_dir_is_one_error_line_before_anything_starts(
    argv: list[str], write_config: WriteConfig, tmp_path: Path
) -> None:
    (tmp_path / "blocker").write_text("a file where the state dir's parent should be")
    config = write_config(two_agents_toml("http://127.0.0.1:9/v1", state_dir="blocker/state"))
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *argv, "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")  # no protocol traffic, no half-started daemon
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot open {tmp_path / 'blocker' / 'state'}/")
    assert line.endswith("make [daemon] state_dir a directory this user can write")
