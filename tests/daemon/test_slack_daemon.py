"""The daemon with a real Slack adapter (slack-bolt, Socket Mode) against the fake Slack and the fake LLM.

What Slack shares with the other platforms runs in test_chat_platforms.py; this is Slack's own.
"""

from __future__ import annotations

import pytest

from tests.conftest import WriteConfig
from tests.daemon.chats import (
    SLACK_ALICE as ALICE,
    SLACK_BOB as BOB,
    SLACK_CAROL as CAROL,
    SLACK_CHANNEL as CHANNEL,
    SLACK_DM as DM,
    plain_posts,
    slack_ask_for_approval as ask_for_approval,
    slack_prompts as prompts,
    request_id,
    slack_toml,
    texts,
    wait_posts,
    wait_text,
)
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.slack_api import FakeSlack, message_event

pytestmark = pytest.mark.slow


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
    assert len(plain_posts(slack)) == 2  # the thread reply streamed (chat.startStream), the other was posted
    asked = [[m["content"] for m in r["messages"] if m["role"] == "user"][-1] for r in fake_llm.requests]
    assert asked == ["status please", "top level"]  # the bot mention was stripped; the chatter never arrived


async def test_a_button_press_is_acknowledged_before_its_slow_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(slack, fake_llm, "slow.txt")
        slack.slow_next("chat.postMessage", 3.0)  # the refusal takes longer than Slack's 3 s ack window
        clicked = await slack.click(request, user=BOB, approve=True)
        await slack.wait_acked(clicked, timeout=1.5)
        await wait_text(slack, "Only the person who asked")
        assert not (workspace / "slow.txt").exists()  # the outsider's press approved nothing
        await slack.click(request, user=CAROL, approve=True)
        await wait_text(slack, "finished slow.txt")
        assert (workspace / "slow.txt").read_text() == "from slack"


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




async def test_a_running_tool_shows_as_the_thread_status_and_never_in_the_streamed_text(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    path = write_config(slack_toml(fake_llm, slack, autonomy="supervised"))
    thread = "1700000000.000200"
    fake_llm.script(
        tool_call("file_write", {"path": "s.txt", "content": "from slack"}, content="Writing it now."),
        text("finished s.txt"),
    )

    def statuses() -> list[str]:
        return [status for _, channel, ts, status in slack.messages.statuses if (channel, ts) == (CHANNEL, thread)]

    async with daemon(path):
        await slack.push_mention("please write s.txt", user=ALICE, channel=CHANNEL, thread_ts=thread)
        # the tool waits for its approval: meanwhile the thread's status says so, not "running"
        await slack.wait_until(lambda: "waiting for approval of file_write..." in statuses(), "the wait in the status")
        await wait_posts(slack, lambda: bool(prompts(slack)))
        assert "running file_write..." not in statuses()
        await slack.click(request_id(prompts(slack)[-1]), user=CAROL, approve=True)
        reply = await wait_text(slack, "finished s.txt")
        await slack.wait_until(lambda: statuses()[-1:] == [""], "the status cleared")
    seen = statuses()
    assert seen.index("waiting for approval of file_write...") < len(seen) - 1 and seen[-1] == ""  # cleared after the tool
    assert reply["thread_ts"] == thread
    assert slack.calls("chat.startStream"), "the thread reply streamed"
    shown = [change.text for change in slack.messages.changes if change.kind != "status"]
    assert shown and not any("running" in text for text in shown)  # the line never was in the text
