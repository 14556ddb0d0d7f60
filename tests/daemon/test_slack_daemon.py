"""The daemon with a real Slack adapter (slack-bolt, Socket Mode) against the fake Slack and the fake LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from orchestrator.store import AuditLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.slack_api import FakeSlack, message_event

ALICE = "U0ALICE"  # asks
BOB = "U0BOB"  # may talk to the bot, may not approve
CAROL = "U0CAROL"  # a route approver
DM = "D0ALICE"
CHANNEL = "C0OPS"


def slack_toml(fake_llm: FakeOpenAI, slack: FakeSlack, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str:
    return (
        provider_toml(fake_llm.base_url)
        + f"""
[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "You are ops on Slack."
autonomy = "{autonomy}"
tools = ["file_write", "list_dir"]

[agents.ops.approval]
timeout_s = {approval_timeout_s}

[channels.work]
kind = "slack"
bot_token = "env:SLACK_BOT"
app_token = "env:SLACK_APP"
api_base_url = "{slack.api_base_url}"
socket_ping_interval_s = 0.5

[[routes]]
channel = "work"
agent = "ops"
senders = ["{ALICE}", "{BOB}", "{CAROL}"]
approvers = ["{CAROL}"]
"""
    )




@pytest.fixture
async def slack(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        monkeypatch.setenv("SLACK_BOT", fake.bot_token)
        monkeypatch.setenv("SLACK_APP", fake.app_token)
        yield fake


def texts(slack: FakeSlack) -> list[str]:
    """Return the text of every plain message the bot posted (approval prompts excluded)."""
    return [m["text"] for m in slack.posted if not m.get("blocks")]


def prompts(slack: FakeSlack) -> list[dict[str, Any]]:
    return [m for m in slack.posted if m.get("blocks")]


def request_id(prompt: dict[str, Any]) -> str:
    """Return the approval request id the prompt's Approve button carries."""
    actions = next(b for b in prompt["blocks"] if b["type"] == "actions")
    return str(next(e["value"] for e in actions["elements"] if e["action_id"] == "approve"))


async def wait_posts(slack: FakeSlack, predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Wait until `predicate()` holds, re-checking after every chat.postMessage."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await slack.wait_posted(len(slack.posted) + 1, timeout=timeout)


async def wait_text(slack: FakeSlack, fragment: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for a plain post containing `fragment`; return the first such post."""
    await wait_posts(slack, lambda: any(fragment in t for t in texts(slack)), timeout=timeout)
    return next(m for m in slack.posted if not m.get("blocks") and fragment in m["text"])


async def ask_for_approval(slack: FakeSlack, fake_llm: FakeOpenAI, file: str) -> str:
    """Have ALICE ask in the DM for a file_write; return the request id of the prompt that follows."""
    seen = len(prompts(slack))
    fake_llm.script(tool_call("file_write", {"path": file, "content": "from slack"}), text(f"finished {file}"))
    await slack.push_message(f"please write {file}", user=ALICE, channel=DM)
    await wait_posts(slack, lambda: len(prompts(slack)) > seen)
    prompt = prompts(slack)[-1]
    assert prompt["channel"] == DM and "file_write" in prompt["text"]
    labels = [e["text"]["text"] for b in prompt["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert labels == ["Approve", "Deny"]
    return request_id(prompt)


async def test_dm_in_reply_out_with_agent_prompt_and_tools(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack))
    fake_llm.default = echo_model
    async with daemon(path):
        envelope = await slack.push_message("hello ops", user=ALICE, channel=DM)
        reply = await wait_text(slack, "ops-model: hello ops")
        await slack.wait_acked(envelope)
    assert reply["channel"] == DM and "thread_ts" not in reply
    assert [c.token for c in slack.calls("chat.postMessage")] == [slack.bot_token]
    (request,) = fake_llm.requests
    assert request["messages"][0] == {"role": "system", "content": "You are ops on Slack."}
    assert sorted(t["function"]["name"] for t in request["tools"]) == ["file_write", "list_dir"]
    assert request["messages"][-1] == {"role": "user", "content": "hello ops"}


async def test_mention_in_a_channel_thread_is_answered_in_that_thread(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack))
    fake_llm.default = echo_model
    thread = "1700000000.000100"
    async with daemon(path):
        # a plain channel message (no mention) is not for the bot; the mention right after is
        await slack.push_message("chatter without mention", user=ALICE, channel=CHANNEL, channel_type="channel")
        await slack.push_mention("status please", user=ALICE, channel=CHANNEL, thread_ts=thread)
        reply = await wait_text(slack, "ops-model: status please")
        await slack.push_mention("top level", user=BOB, channel=CHANNEL)
        top = await wait_text(slack, "ops-model: top level")
    assert (reply["channel"], reply["thread_ts"]) == (CHANNEL, thread)
    assert top["channel"] == CHANNEL and "thread_ts" not in top
    assert len(slack.posted) == 2
    asked = [[m["content"] for m in r["messages"] if m["role"] == "user"][-1] for r in fake_llm.requests]
    assert asked == ["status please", "top level"]  # the bot mention was stripped; the chatter never arrived


async def test_long_reply_is_chunked_with_code_fences_intact(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack))
    code = [f"value_{i:04d} = compute({i}, scale=2.5)  # step {i}" for i in range(220)]
    long_reply = "Here is the script:\n\n```python\n" + "\n".join(code) + "\n```\nThat is all."
    assert len(long_reply) > 2 * 4000
    fake_llm.script(text(long_reply))
    async with daemon(path):
        await slack.push_message("give me the script", user=ALICE, channel=DM)
        await wait_text(slack, "That is all.")
    chunks = texts(slack)
    assert len(chunks) >= 3
    assert all(len(c) <= 4000 for c in chunks)
    assert all(m["channel"] == DM for m in slack.posted)
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0, chunk[-80:]  # each chunk opens and closes its fences
    assert chunks[0].startswith("Here is the script:") and chunks[-1].endswith("That is all.")
    assert all(c.startswith("```python\n") for c in chunks[1:])  # continuations reopen the block
    shown = [line for c in chunks for line in c.split("\n") if line.startswith("value_")]
    assert shown == code  # nothing lost, nothing repeated, lines never split


async def test_a_button_press_is_acknowledged_before_its_slow_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    async with daemon(path):
        request = await ask_for_approval(slack, fake_llm, "slow.txt")
        slack.slow_next("chat.postMessage", 3.0)  # the refusal takes longer than Slack's 3 s ack window
        clicked = await slack.click(request, user=BOB, approve=True)
        await slack.wait_acked(clicked, timeout=1.5)
        await wait_text(slack, "Only the person who asked")
        await slack.click(request, user=CAROL, approve=True)
        await wait_text(slack, "finished slow.txt")


async def test_approval_buttons_outsider_refused_then_approver_approves(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(slack, fake_llm, "approved.txt")
        clicked = await slack.click(request, user=BOB, approve=True)  # BOB may talk to ops, not approve
        await wait_text(slack, "Only the person who asked")
        await slack.wait_acked(clicked)
        assert not (workspace / "approved.txt").exists()
        assert len(fake_llm.requests) == 1  # the turn is still waiting on the approval
        await slack.click(request, user=CAROL, approve=True)
        await wait_text(slack, "finished approved.txt")
        assert (workspace / "approved.txt").read_text() == "from slack"
    assert texts(slack)[-1] == "finished approved.txt"
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["tool"], r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("file_write", "approved", f"work:{CAROL}")]


async def test_approval_deny_button_means_not_run(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(slack, fake_llm, "denied.txt")
        await slack.click(request, user=ALICE, approve=False)  # the requester may answer
        await wait_text(slack, "finished denied.txt")
        assert not (workspace / "denied.txt").exists()
    tool_result = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "denied" in tool_result.lower() and "from slack" not in tool_result
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("denied", f"work:{ALICE}")]


async def test_approval_timeout_means_not_run_and_the_chat_is_told(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised", approval_timeout_s=1))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(slack, fake_llm, "late.txt")
        note = await wait_text(slack, "in time: it was not run")
        await wait_text(slack, "finished late.txt")
        late = await slack.click(request, user=ALICE, approve=True)  # too late: nothing is pending
        await wait_text(slack, f"There is no pending approval {request}")
        await slack.wait_acked(late)
    assert note["channel"] == DM and request in note["text"]
    assert not (workspace / "late.txt").exists()
    assert len(fake_llm.requests) == 2  # the late click started nothing


async def test_redelivered_event_after_restart_is_not_answered_twice(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack))
    fake_llm.default = echo_model
    event = message_event("only once", user=ALICE, channel=DM, event_id="EvSAME0001")
    async with daemon(path):
        first = await slack.push_event(event)
        await wait_text(slack, "ops-model: only once")
        await slack.wait_acked(first)
    await slack.drop_socket()  # forget the old connection so pushes reach the new process
    async with daemon(path):
        again = await slack.push_event(event, retry_attempt=1)  # Slack retries: same event_id
        await slack.wait_acked(again)
        await slack.push_message("next", user=ALICE, channel=DM)
        await wait_text(slack, "ops-model: next")
    assert texts(slack) == ["ops-model: only once", "ops-model: next"]
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["only once", "next"]
    assert slack.connections == 2


async def test_approval_refusal_stays_in_the_thread(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    thread = "1700000000.000100"
    async with daemon(path):
        fake_llm.script(tool_call("file_write", {"path": "t.txt", "content": "x"}), text("finished t.txt"))
        await slack.push_mention("write t.txt", user=ALICE, channel=CHANNEL, thread_ts=thread)
        await wait_posts(slack, lambda: len(prompts(slack)) == 1)
        assert prompts(slack)[0]["thread_ts"] == thread
        await slack.click(request_id(prompts(slack)[0]), user=BOB, approve=True)
        refusal = await wait_text(slack, "Only the person who asked")
        await slack.click(request_id(prompts(slack)[0]), user=ALICE, approve=False)
        await wait_text(slack, "finished t.txt")
    assert (refusal["channel"], refusal.get("thread_ts")) == (CHANNEL, thread)


async def test_approval_prompt_shows_every_argument_name_despite_a_long_first_one(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    arguments = {"content": "A" * 5000, "path": "hidden.txt"}
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    async with daemon(path):
        fake_llm.script(tool_call("file_write", arguments), text("finished hidden.txt"))
        await slack.push_message("please write", user=ALICE, channel=DM)
        await wait_posts(slack, lambda: bool(prompts(slack)))
        (prompt,) = prompts(slack)
        await slack.click(request_id(prompt), user=ALICE, approve=False)
        await wait_text(slack, "finished hidden.txt")
    section = prompt["blocks"][0]["text"]["text"]
    # the core handed the whole call over; the adapter fitted it to one section (3,000 characters)
    shown = section.split("```")[1]
    assert shown.startswith('{"path": "hidden.txt", "content": "AAA') and "chars cut]…" in shown
    assert len(shown) > 2500 and len(section) <= 3000
