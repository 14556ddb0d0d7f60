"""The daemon behaves the same on every chat platform: each test runs once per real adapter and fake.

Platform-specific behaviour (mentions, threads, typing, acknowledgement deadlines, redelivery)
stays in test_discord_daemon.py, test_slack_daemon.py and test_telegram_daemon.py.
"""

from __future__ import annotations

import pytest

from orchestrator.store import AuditLog
from tests.conftest import WriteConfig
from tests.daemon.chats import ALL_CHATS, BUTTON_CHATS, ButtonChat, Chat
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

pytestmark = pytest.mark.slow

button_chats = pytest.mark.parametrize("chat", BUTTON_CHATS, indirect=True)
all_chats = pytest.mark.parametrize("chat", ALL_CHATS, indirect=True)


@button_chats
async def test_long_reply_is_chunked_with_code_fences_intact(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: ButtonChat
) -> None:
    path = write_config(chat.toml(fake_llm))
    code = [f"value_{i:04d} = compute({i}, scale=2.5)  # step {i}" for i in range(chat.limit * 11 // 200)]
    long_reply = "Here is the script:\n\n```python\n" + "\n".join(code) + "\n```\nThat is all."
    assert len(long_reply) > 2 * chat.limit
    fake_llm.script(text(long_reply))
    async with daemon(path):
        message = await chat.push_dm("give me the script")
        await chat.wait_text("That is all.")
    chunks = chat.texts()
    assert len(chunks) >= 3
    assert all(len(c) <= chat.limit for c in chunks)
    assert all(chat.chat_of(m) == chat.dm for m in chat.posts())
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0, chunk[-80:]  # each chunk opens and closes its fences
    assert chunks[0].startswith("Here is the script:") and chunks[-1].endswith("That is all.")
    assert all(c.startswith("```python\n") for c in chunks[1:])  # continuations reopen the block
    shown = [line for c in chunks for line in c.split("\n") if line.startswith("value_")]
    assert shown == code  # nothing lost, nothing repeated, lines never split
    chat.assert_only_first_chunk_replies(message)


@button_chats
async def test_approval_buttons_outsider_refused_then_approver_approves(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: ButtonChat
) -> None:
    path = write_config(chat.toml(fake_llm, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await chat.ask_for_approval(fake_llm, "approved.txt")
        outsider = await chat.click(request, chat.bob, approve=True)  # BOB may talk to ops, not approve
        refusal = await chat.wait_text("Only the person who asked")
        await chat.assert_acknowledged(outsider)
        assert chat.chat_of(refusal) == chat.asks_in
        assert not (workspace / "approved.txt").exists()
        assert len(fake_llm.requests) == 1  # the turn is still waiting on the approval
        approver = await chat.click(request, chat.carol, approve=True)
        await chat.wait_text("finished approved.txt")
        assert (workspace / "approved.txt").read_text() == chat.marker
        await chat.assert_acknowledged(outsider, approver)
    assert chat.texts()[-1] == "finished approved.txt"
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["tool"], r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("file_write", "approved", f"{chat.channel}:{chat.carol}")]


@button_chats
async def test_approval_deny_button_means_not_run(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: ButtonChat
) -> None:
    path = write_config(chat.toml(fake_llm, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await chat.ask_for_approval(fake_llm, "denied.txt")
        await chat.click(request, chat.alice, approve=False)  # the requester may answer
        await chat.wait_text("finished denied.txt")
        assert not (workspace / "denied.txt").exists()
    tool_result = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "denied" in tool_result.lower() and chat.marker not in tool_result
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("denied", f"{chat.channel}:{chat.alice}")]


@button_chats
async def test_approval_timeout_means_not_run_and_the_chat_is_told(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: ButtonChat
) -> None:
    path = write_config(chat.toml(fake_llm, autonomy="supervised", approval_timeout_s=1))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await chat.ask_for_approval(fake_llm, "late.txt")
        note = await chat.wait_text("in time: it was not run")
        await chat.wait_text("finished late.txt")
        late = await chat.click(request, chat.alice, approve=True)  # too late: nothing is pending
        await chat.wait_text(f"There is no pending approval {request}")
        await chat.assert_acknowledged(late)
    assert chat.chat_of(note) == chat.asks_in and request in chat.text_of(note)
    assert not (workspace / "late.txt").exists()
    assert len(fake_llm.requests) == 2  # the late click started nothing


@all_chats
async def test_approval_prompt_shows_every_argument_name_despite_a_long_first_one(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: Chat
) -> None:
    arguments = {"content": "A" * 5000, "path": "hidden.txt"}
    path = write_config(chat.toml(fake_llm, autonomy="supervised"))
    async with daemon(path):
        fake_llm.script(tool_call("file_write", arguments), text("finished hidden.txt"))
        await chat.ask("please write")
        prompt = await chat.wait_prompt()
        await chat.click(chat.request_of(prompt), chat.alice, approve=False)
        await chat.wait_text("finished hidden.txt")
    # the core handed the whole call over; the adapter fitted it to the platform's room
    shown = chat.arguments_in(prompt)
    assert shown.startswith('{"path": "hidden.txt", "content": "AAA') and "chars cut]…" in shown
    assert len(shown) > 0.7 * chat.prompt_room and len(chat.prompt_text(prompt)) <= chat.prompt_room
