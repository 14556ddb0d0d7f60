"""The Slack adapter through slack-bolt / slack_sdk against a loopback fake of Slack."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels import ApprovalAnswer, ApprovalPrompt, ChannelAuthError, ChannelError, Inbound, Outbound, create_adapter
from channels.slack import SlackAdapter
from channels.supervisor import supervise
from orchestrator.lifecycle import Lifecycle
from orchestrator.config.channels import SlackChannelConfig
from orchestrator.config.secrets import SecretRef
from orchestrator.policy import ApprovalArguments
from tests.fakes.slack_api import (
    FakeSlack,
    block_actions,
    message_event,
    post_event,
    post_interaction,
)

pytestmark = pytest.mark.slow

SIGNING_SECRET = "fake-signing-secret"
Item = Inbound | ApprovalAnswer


class Inbox:
    """A `deliver` callback queueing what the adapter delivers; it can be held shut or fail."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[Item] = asyncio.Queue()
        self.attempts: list[Item] = []
        self.gate: asyncio.Event | None = None
        self.fail_text: str | None = None

    async def deliver(self, item: Item) -> None:
        self.attempts.append(item)
        if self.gate is not None:
            await self.gate.wait()
        if isinstance(item, Inbound) and item.text == self.fail_text:
            raise RuntimeError("the store is down")
        await self.items.put(item)

    async def next(self, timeout: float = 10.0) -> Item:
        async with asyncio.timeout(timeout):
            return await self.items.get()


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def make_adapter(
    fake: FakeSlack, *, bot_token: str | None = None, app_token: str | None = None, **config: Any
) -> SlackAdapter:
    secrets = {
        "env:BOT": bot_token or fake.bot_token,
        "env:APP": app_token or fake.app_token,
        "env:SIGNING": SIGNING_SECRET,
    }
    settings: dict[str, Any] = {
        "kind": "slack",
        "bot_token": "env:BOT",
        "app_token": "env:APP",
        "signing_secret": "env:SIGNING",
        "api_base_url": fake.api_base_url,
        "socket_ping_interval_s": 0.2,
        **config,
    }
    adapter = create_adapter("work", SlackChannelConfig.model_validate(settings), secrets=lambda ref: secrets[ref])
    assert isinstance(adapter, SlackAdapter)
    return adapter


@asynccontextmanager
async def running(adapter: SlackAdapter, inbox: Inbox) -> AsyncIterator[None]:
    """Run the adapter in a task group until the block ends; fail if it is not ready in 10 s."""
    ready = asyncio.Event()
    async with adapter, asyncio.TaskGroup() as tasks:
        task = tasks.create_task(adapter.run(inbox.deliver, ready.set))
        async with asyncio.timeout(10):
            await ready.wait()
        try:
            yield
        finally:
            task.cancel()


@asynccontextmanager
async def socket_adapter(fake: FakeSlack, inbox: Inbox) -> AsyncIterator[SlackAdapter]:
    adapter = make_adapter(fake)
    async with running(adapter, inbox):
        await fake.wait_connections(1)
        yield adapter


def prompt(request_id: str = "req-7") -> ApprovalPrompt:
    return ApprovalPrompt(
        request_id=request_id,
        chat="D0001",
        thread=None,
        requester="U0001",
        tool="shell",
        arguments=ApprovalArguments.of({"command": "rm -rf /tmp/x && echo <done>"}),
        timeout_s=300,
    )


# -- Socket Mode: receiving ---------------------------------------------------------------------


async def test_dm_is_delivered_with_slack_ids_and_acked_after_deliver(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        inbox.gate = asyncio.Event()
        envelope = await fake.push_message("hello & <bye>", user="U0042", channel="D0042")
        await asyncio.sleep(0.3)
        assert envelope not in fake.acked  # deliver() has not returned: Slack must not see an ack
        inbox.gate.set()
        item = await inbox.next()
        await fake.wait_acked(envelope)
    assert isinstance(item, Inbound)
    assert (item.channel, item.chat, item.sender, item.text) == ("work", "D0042", "U0042", "hello & <bye>")
    assert item.event_id.startswith("Ev") and item.message_id and item.thread is None and item.is_direct


async def test_failed_deliver_is_not_acknowledged_so_slack_redelivers(fake: FakeSlack) -> None:
    inbox = Inbox()
    inbox.fail_text = "lost?"
    async with socket_adapter(fake, inbox):
        failed = await fake.push_message("lost?")
        delivered = await fake.push_message("next")
        item = await inbox.next()
        await fake.wait_acked(delivered)
        async with asyncio.timeout(5):
            while not any(isinstance(i, Inbound) and i.text == "lost?" for i in inbox.attempts):
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # time enough for an ack, had one been sent
    assert isinstance(item, Inbound) and item.text == "next"
    assert failed not in fake.acked


async def test_mention_in_channel_thread_drops_the_mention_and_keeps_the_thread(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        await fake.push_mention("what is up?", user="U0007", channel="C0100", thread_ts="1700000000.000100")
        item = await inbox.next()
    assert isinstance(item, Inbound)
    assert (item.chat, item.sender, item.text) == ("C0100", "U0007", "what is up?")
    assert item.thread == "1700000000.000100" and not item.is_direct


async def test_bot_messages_edits_and_channel_messages_mentioning_the_bot_are_ignored(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        ignored = [
            await fake.push_message("from a bot", bot_id="B0009"),
            await fake.push_message("from a bot", subtype="bot_message"),
            await fake.push_message("edited", subtype="message_changed"),
            # its app_mention carries it, so it is never handled twice
            await fake.push_message(f"<@{fake.bot_user_id}> hi", channel="C0100", channel_type="channel"),
            await fake.push_message("my own echo", user=fake.bot_user_id),
        ]
        await fake.push_message("a real one")
        item = await inbox.next()
        for envelope in ignored:  # acknowledged, so Slack does not retry them
            await fake.wait_acked(envelope)
    assert isinstance(item, Inbound) and item.text == "a real one"
    assert inbox.items.empty()


async def test_channel_chatter_is_delivered_with_its_group_facts(fake: FakeSlack) -> None:
    # the route's group gate (the core) decides; the adapter reports what it sees
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        await fake.push_message("chatter", channel="C0100", channel_type="channel")
        await fake.push_message(
            "in the bot's thread", channel="C0100", channel_type="channel", thread_ts="1.0", parent_user_id=fake.bot_user_id
        )
        await fake.push_mention("what is up?", channel="C0100")
        chatter, reply, mention = await inbox.next(), await inbox.next(), await inbox.next()
    assert isinstance(chatter, Inbound) and (chatter.is_direct, chatter.mentions_bot, chatter.reply_to_bot) == (False, False, False)
    assert isinstance(reply, Inbound) and reply.reply_to_bot and not reply.mentions_bot
    assert isinstance(mention, Inbound) and (mention.text, mention.mentions_bot) == ("what is up?", True)


async def test_redelivered_event_keeps_its_event_id(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        body = message_event("once", user="U0001")
        await fake.push_event(body)
        await fake.push_event(body, retry_attempt=1)
        first, second = await inbox.next(), await inbox.next()
    assert isinstance(first, Inbound) and isinstance(second, Inbound)
    assert first.event_id == second.event_id == body["event_id"]


async def test_text_approve_and_deny_become_answers(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        await fake.push_message(" /approve req-1", user="U0001", channel="D0001")
        await fake.push_mention("/deny req-2", user="U0003", channel="C0100")
        first, second = await inbox.next(), await inbox.next()
    assert first == ApprovalAnswer(channel="work", request_id="req-1", sender="U0001", approved=True, chat="D0001")
    assert second == ApprovalAnswer(channel="work", request_id="req-2", sender="U0003", approved=False, chat="C0100")


# -- sending --------------------------------------------------------------------------------------


async def test_send_chunks_to_4000_and_keeps_code_fences(fake: FakeSlack) -> None:
    code = "\n".join(f"line {i} = {i} * 2" for i in range(400))
    text = "Here you go:\n\n```python\n" + code + "\n```\n\nDone: a < b."
    async with make_adapter(fake) as adapter:
        await adapter.send(Outbound(chat="C0100", text=text, thread="1700000000.000100"))
    assert len(fake.posted) >= 2
    for message in fake.posted:
        assert len(message["text"]) <= 4000
        assert message["text"].count("```") % 2 == 0  # every chunk opens and closes its fence
        assert (message["channel"], message["thread_ts"]) == ("C0100", "1700000000.000100")
    assert fake.posted[1]["text"].startswith("```python\n")
    assert fake.posted[-1]["text"].endswith("Done: a &lt; b.")
    assert all(call.token == fake.bot_token for call in fake.calls("chat.postMessage"))


async def test_top_level_send_has_no_thread(fake: FakeSlack) -> None:
    async with make_adapter(fake) as adapter:
        await adapter.send(Outbound(chat="D0001", text="hi"))
    assert fake.posted[0]["text"] == "hi" and "thread_ts" not in fake.posted[0]


async def test_rate_limited_send_is_retried_after_retry_after(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", status=429, retry_after=1)
    async with make_adapter(fake) as adapter:
        started = time.monotonic()
        await adapter.send(Outbound(chat="D0001", text="patience"))
        elapsed = time.monotonic() - started
    assert len(fake.calls("chat.postMessage")) == 2
    assert [m["text"] for m in fake.posted] == ["patience"]
    assert elapsed >= 1.0


async def test_send_gives_up_after_bounded_rate_limit_retries(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", status=429, retry_after=0, times=10)
    async with make_adapter(fake) as adapter:
        with pytest.raises(ChannelError, match="ratelimited") as raised:
            await adapter.send(Outbound(chat="D0001", text="never"))
    assert not isinstance(raised.value, ChannelAuthError)
    assert len(fake.calls("chat.postMessage")) == 4  # the first try and 3 retries
    assert fake.posted == []


async def test_typing_outside_a_thread_is_a_no_op(fake: FakeSlack) -> None:
    async with make_adapter(fake) as adapter:
        await adapter.typing("D0001", None)
    assert fake.requests == []


async def test_typing_in_a_thread_sets_the_assistant_status(fake: FakeSlack) -> None:
    adapter = make_adapter(fake)
    async with running(adapter, Inbox()):
        await adapter.typing("D0001", "1700000000.000100")
    assert [(c.args["channel_id"], c.args["thread_ts"], c.args["status"])
            for c in fake.calls("assistant.threads.setStatus")] == [("D0001", "1700000000.000100", "is thinking...")]


async def test_typing_without_the_status_scope_is_logged_once_and_never_raises(fake: FakeSlack) -> None:
    fake.messages.status_scope = False
    adapter = make_adapter(fake)
    async with running(adapter, Inbox()):
        await adapter.typing("D0001", "1700000000.000100")
        await adapter.typing("D0001", "1700000000.000100")
    await adapter.typing("D0001", "1700000000.000100")  # closed: nothing, and no new HTTP session
    assert len(fake.calls("assistant.threads.setStatus")) == 1


# -- approvals --------------------------------------------------------------------------------------


async def test_approval_prompt_shows_buttons_and_clicks_become_answers(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox) as adapter:
        await adapter.prompt_approval(prompt("req-7"))
        message = fake.find_prompt("req-7")
        approve = await fake.click("req-7", user="U0099", approve=True)
        deny = await fake.click("req-7", user="U0100", approve=False)
        first, second = await inbox.next(), await inbox.next()
        await fake.wait_acked(approve)
        await fake.wait_acked(deny)
    assert message["channel"] == "D0001"
    section = message["blocks"][0]["text"]["text"]
    assert "`shell`" in section and "&lt;done&gt;" in section and "<@U0001>" in section
    buttons = message["blocks"][1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [("ap:req-7:y",) * 2, ("ap:req-7:n",) * 2]
    assert first == ApprovalAnswer(channel="work", request_id="req-7", sender="U0099", approved=True, chat="D0001")
    assert second == ApprovalAnswer(channel="work", request_id="req-7", sender="U0100", approved=False, chat="D0001")


def buttons_message(*buttons: tuple[str, str]) -> dict[str, Any]:
    """Return a posted prompt as Slack holds it, with buttons of these (action_id, value)."""
    elements = [
        {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": "Press"}, "value": value}
        for action_id, value in buttons
    ]
    return {
        "channel": "D0001", "ts": "1700000000.000200", "text": "Approval needed",
        "blocks": [{"type": "actions", "block_id": "approval:x", "elements": elements}],
    }


async def press(fake: FakeSlack, button: tuple[str, str]) -> str:
    """Press the one button (action_id, value) of a prompt; return the envelope id."""
    return await fake.push("interactive", block_actions(buttons_message(button), button[0], user="U0099"))


async def test_a_button_posted_before_the_codec_still_answers_and_its_id_is_checked(fake: FakeSlack) -> None:
    inbox = Inbox()
    # an older prompt's buttons: action_id approve|deny and the bare id, read through the codec
    old = [("approve", "req-old"), ("deny", "req-old")]
    bad_ids = [("deny", "re q"), ("approve", "a:b"), ("approve", "x" * 65), ("deny", "req\u202e"), ("approve", "")]
    async with socket_adapter(fake, inbox):
        pressed = [await press(fake, button) for button in old]
        answers = [await inbox.next(), await inbox.next()]
        ignored = [await press(fake, button) for button in bad_ids]
        for envelope in (*pressed, *ignored):
            await fake.wait_acked(envelope)  # acked once `deliver` returned (or was never called)
    assert sorted(answers, key=lambda a: a.approved) == [
        ApprovalAnswer(channel="work", request_id="req-old", sender="U0099", approved=flag, chat="D0001")
        for flag in (False, True)
    ]
    assert len(inbox.attempts) == 2 and inbox.items.empty()  # no impossible id reached the core


async def test_a_press_the_codec_does_not_read_is_acked_and_never_an_answer(fake: FakeSlack) -> None:
    inbox = Inbox()
    forged = [
        ("ap:re q:y", "ap:re q:y"), ("ap:req:yes", "ap:req:yes"), ("ap:a:b:y", "ap:a:b:y"), ("AP:req:y", "AP:req:y"),
        ("approve", "ap:req:y:"), ("yes", "req-7"), ("approval", "req-7"), ("show", "req-7"),
    ]
    async with socket_adapter(fake, inbox):
        envelopes = [await press(fake, button) for button in forged]
        answered = await press(fake, ("x", "ap:req-7:n"))
        last = await inbox.next()  # the one well-formed payload, whatever its action_id
        for envelope in (*envelopes, answered):
            await fake.wait_acked(envelope)
    assert last == ApprovalAnswer(channel="work", request_id="req-7", sender="U0099", approved=False, chat="D0001")
    assert len(inbox.attempts) == 1 and inbox.items.empty()


async def test_approval_preview_is_cut_to_fit_a_section(fake: FakeSlack) -> None:
    long = ApprovalPrompt(
        request_id="req-8", chat="C0100", thread="1.2", requester="someone", tool="write",
        arguments=ApprovalArguments.of({"content": "<&>```" * 2000, "path": "x"}), timeout_s=90,
    )
    async with make_adapter(fake) as adapter:
        await adapter.prompt_approval(long)  # the fake refuses a section over 3,000 characters, as Slack does
    message = fake.find_prompt("req-8")
    section = message["blocks"][0]["text"]["text"]
    assert 2900 < len(section) <= 3000 and section.count("```") == 2  # escaping counted, the room used
    assert "chars cut]…" in section and section.endswith(', "path": "x"}```')
    assert message["thread_ts"] == "1.2" and "90 s" in message["blocks"][2]["elements"][0]["text"]


# -- credentials and connection -----------------------------------------------------------------------


async def test_bad_bot_token_is_an_auth_error_without_retries(fake: FakeSlack) -> None:
    async with make_adapter(fake, bot_token="xoxb-wrong") as adapter:
        async with asyncio.timeout(5):
            with pytest.raises(ChannelAuthError, match="invalid_auth"):
                await adapter.run(Inbox().deliver, lambda: None)
    assert len(fake.calls("auth.test")) == 1
    assert fake.calls("apps.connections.open") == [] and fake.connections == 0


async def test_bad_app_token_is_an_auth_error_without_retries(fake: FakeSlack) -> None:
    async with make_adapter(fake, app_token="xapp-wrong") as adapter:
        async with asyncio.timeout(5):
            with pytest.raises(ChannelAuthError, match="apps.connections.open: invalid_auth"):
                await adapter.run(Inbox().deliver, lambda: None)
    assert len(fake.calls("apps.connections.open")) == 1 and fake.connections == 0


async def test_unreachable_slack_is_a_retryable_channel_error() -> None:
    async with FakeSlack() as gone:
        adapter = make_adapter(gone)
    async with adapter, asyncio.timeout(10):
        with pytest.raises(ChannelError) as raised:
            await adapter.run(Inbox().deliver, lambda: None)
    assert not isinstance(raised.value, ChannelAuthError)


async def test_sdk_reconnects_after_the_socket_drops(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with socket_adapter(fake, inbox):
        await fake.drop_socket()
        await fake.wait_connections(2)
        envelope = await fake.push_message("still there?")
        item = await inbox.next()
        await fake.wait_acked(envelope)
    assert isinstance(item, Inbound) and item.text == "still there?"
    assert len(fake.calls("apps.connections.open")) >= 3  # the probe, the first connect, the reconnect


async def test_run_raises_when_the_socket_stays_down_and_a_second_run_recovers(fake: FakeSlack) -> None:
    inbox = Inbox()
    ready = asyncio.Event()

    async def break_the_socket() -> None:
        await ready.wait()
        fake.socket_available = False
        await fake.drop_socket()

    async with make_adapter(fake) as adapter:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(break_the_socket())
            started = time.monotonic()
            with pytest.raises(ChannelError, match="disconnected for over 1.2s"):
                async with asyncio.timeout(10):
                    await adapter.run(inbox.deliver, ready.set)
        assert time.monotonic() - started < 5  # 6 ping intervals of 0.2 s, not the SDK's endless retry
        fake.socket_available = True
        async with running(adapter, inbox):
            await fake.push_message("back")
            item = await inbox.next()
    assert isinstance(item, Inbound) and item.text == "back"


# -- HTTP Events API ------------------------------------------------------------------------------------


@asynccontextmanager
async def http_adapter(fake: FakeSlack, inbox: Inbox) -> AsyncIterator[tuple[SlackAdapter, str]]:
    adapter = make_adapter(fake, mode="http", http_port=0, http_path="/slack/events")
    async with running(adapter, inbox):
        assert adapter.http_url is not None and adapter.http_url.endswith("/slack/events")
        yield adapter, adapter.http_url
    assert adapter.http_url is None


async def test_http_url_verification_is_answered(fake: FakeSlack) -> None:
    async with http_adapter(fake, Inbox()) as (_, url):
        body = {"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMm", "type": "url_verification"}
        status, text = await post_event(url, body, secret=SIGNING_SECRET)
    assert status == 200 and "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMm" in text


async def test_http_signed_event_is_delivered_and_a_retry_keeps_the_event_id(fake: FakeSlack) -> None:
    inbox = Inbox()
    body = message_event("over http", user="U0005", channel="D0005")
    async with http_adapter(fake, inbox) as (_, url):
        first = await post_event(url, body, secret=SIGNING_SECRET)
        retry = await post_event(url, body, secret=SIGNING_SECRET, retry_num=1)
        items = [await inbox.next(), await inbox.next()]
    assert first[0] == retry[0] == 200
    assert all(isinstance(i, Inbound) and i.text == "over http" and i.sender == "U0005" for i in items)
    assert {i.event_id for i in items if isinstance(i, Inbound)} == {body["event_id"]}


async def test_http_bad_signature_and_stale_timestamp_are_rejected(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with http_adapter(fake, inbox) as (_, url):
        forged = await post_event(url, message_event("forged"), secret=SIGNING_SECRET, bad_signature=True)
        stale = await post_event(url, message_event("stale"), secret=SIGNING_SECRET, timestamp=int(time.time()) - 301)
        good = await post_event(url, message_event("fine"), secret=SIGNING_SECRET)
        item = await inbox.next()
    assert (forged[0], stale[0], good[0]) == (401, 401, 200)
    assert isinstance(item, Inbound) and item.text == "fine" and inbox.items.empty()


async def test_http_button_click_is_acked_and_delivered(fake: FakeSlack) -> None:
    inbox = Inbox()
    async with http_adapter(fake, inbox) as (adapter, url):
        await adapter.prompt_approval(prompt("req-9"))
        payload = block_actions(fake.find_prompt("req-9"), "ap:req-9:n", user="U0777")
        status, _ = await post_interaction(url, payload, secret=SIGNING_SECRET)
        item = await inbox.next()
    assert status == 200
    assert item == ApprovalAnswer(channel="work", request_id="req-9", sender="U0777", approved=False, chat="D0001")


# -- config ----------------------------------------------------------------------------------------------


def test_config_adds_ping_interval_and_allows_an_ephemeral_http_port() -> None:
    config = SlackChannelConfig(kind="slack", bot_token=SecretRef("env:B"), mode="http", http_port=0)
    assert config.socket_ping_interval_s == 10.0 and config.http_port == 0
    with pytest.raises(ValueError, match="should match pattern"):
        SlackChannelConfig(kind="slack", bot_token=SecretRef("env:B"), http_path="slack/events")


async def test_a_dropped_socket_is_reconnecting_until_the_sdk_is_back(fake: FakeSlack) -> None:
    changes: list[tuple[Lifecycle, str | None]] = []
    readies: list[int] = []

    adapter = make_adapter(fake, socket_ping_interval_s=1.0)  # a 6 s grace before the supervisor steps in
    async with adapter, asyncio.TaskGroup() as tasks:
        task = tasks.create_task(supervise(
            adapter, Inbox().deliver, on_ready=lambda: readies.append(1), on_fatal=lambda exc: None,
            on_change=lambda state, reason: changes.append((state, reason)),
        ))
        async with asyncio.timeout(20):
            while not readies:
                await asyncio.sleep(0.02)
            fake.socket_available = False
            await fake.drop_socket()
            while not changes:
                await asyncio.sleep(0.02)
            fake.socket_available = True
            while changes[-1][0] is not Lifecycle.READY:
                await asyncio.sleep(0.02)
        task.cancel()
    assert changes[0] == (Lifecycle.RECONNECTING, "socket mode: disconnected; the SDK is reconnecting")
    assert changes[-1] == (Lifecycle.READY, None) and readies == [1]  # recovered in place, never torn down
