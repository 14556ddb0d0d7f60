"""The Telegram adapter through python-telegram-bot against a loopback fake Bot API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from channels import ApprovalAnswer, ApprovalPrompt, ChannelAdapter, ChannelAuthError, ChannelError, Inbound, Outbound
from channels import create_adapter
from channels.supervisor import Backoff, supervise
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig
from orchestrator.policy import ApprovalArguments
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

SECRET = "s3cret-Token_1"
MakeAdapter = Callable[..., ChannelAdapter]


class Inbox:
    """A `deliver` callback that records what it is given."""

    def __init__(self) -> None:
        self.items: list[Inbound | ApprovalAnswer] = []

    async def __call__(self, item: Inbound | ApprovalAnswer, /, *, synced: bool = True) -> None:
        self.items.append(item)

    async def wait(self, count: int = 1, *, timeout: float = 5.0) -> list[Inbound | ApprovalAnswer]:
        async with asyncio.timeout(timeout):
            while len(self.items) < count:
                await asyncio.sleep(0.01)
        return self.items


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def make_adapter(fake: FakeTelegram) -> AsyncIterator[MakeAdapter]:
    """Build adapters through the registry, as the daemon does; close them after the test."""
    made: list[ChannelAdapter] = []
    values = {"env:TG_TOKEN": fake.token, "env:TG_BAD": "999:wrong-token", "env:TG_SECRET": SECRET}

    def secrets(ref: SecretRef) -> str:
        return values[ref]

    def make(**overrides: Any) -> ChannelAdapter:
        raw = {"kind": "telegram", "token": "env:TG_TOKEN", "api_base_url": fake.api_base_url, "poll_timeout_s": 1.0}
        config = TelegramChannelConfig.model_validate(raw | overrides)
        adapter = create_adapter("tg", config, secrets=secrets)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        await adapter.aclose()


@asynccontextmanager
async def running(
    adapter: ChannelAdapter, deliver: Callable[[Inbound | ApprovalAnswer], Awaitable[None]]
) -> AsyncIterator[asyncio.Task[None]]:
    """Run the adapter in a task until the block ends; enter once it called ready()."""
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        task = group.create_task(adapter.run(deliver, ready.set))
        try:
            async with asyncio.timeout(5):
                await ready.wait()
            yield task
        finally:
            task.cancel()


async def test_inbound_messages_carry_platform_ids(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    inbox = Inbox()
    dm = fake.push_message(chat_id=42, user_id=7, text="hello bot", first_name="Ada")
    topic = fake.push_message(chat_id=-100500, user_id=8, text="in a topic", chat_type="supergroup", thread_id=5)
    async with running(make_adapter(), inbox):
        first, second = await inbox.wait(2)
    assert first == Inbound(
        channel="tg",
        chat="42",
        sender="7",
        text="hello bot",
        event_id=str(dm["update_id"]),
        message_id=str(dm["message"]["message_id"]),
        thread=None,
        sender_name="Ada",
        is_direct=True,
    )
    assert isinstance(second, Inbound)
    assert (second.chat, second.sender, second.thread, second.is_direct) == ("-100500", "8", "5", False)
    assert second.event_id == str(topic["update_id"])
    assert fake.calls("deleteWebhook"), "polling must clear a leftover webhook"
    assert fake.calls("getUpdates")[0]["allowed_updates"] == ["message", "callback_query"]


async def test_undelivered_update_is_fetched_again_after_restart(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    update = fake.push_message(chat_id=42, user_id=7, text="survive a crash")
    started, never = asyncio.Event(), asyncio.Event()
    seen: list[Inbound | ApprovalAnswer] = []

    async def stuck(item: Inbound | ApprovalAnswer, /, *, synced: bool = True) -> None:
        seen.append(item)
        started.set()
        await never.wait()  # the process dies while the core is still storing the message

    async with running(make_adapter(), stuck):
        await asyncio.wait_for(started.wait(), 5)
        assert fake.pending() == [update], "an update being delivered must not be confirmed yet"

    inbox = Inbox()  # "restart": a fresh adapter with no memory of the offset
    async with running(make_adapter(), inbox):
        (again,) = await inbox.wait(1)
        await fake.wait_for(lambda: not fake.pending())  # confirmed once delivered
    assert isinstance(again, Inbound) and isinstance(seen[0], Inbound)
    assert again.event_id == seen[0].event_id == str(update["update_id"])


LONG_CODE = "\n".join(f"print({i})  # line {i:04d} " + "x" * 40 for i in range(150))
LONG_ANSWER = "Here **you** go:\n\n```python\n" + LONG_CODE + "\n```\n\nDone."


async def test_send_renders_markdown_as_entities_split_at_the_limit(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    await make_adapter().send(Outbound(chat="42", text=LONG_ANSWER, thread="9", reply_to="77"))
    sent = fake.sent  # the fake refuses entities outside their text, as Telegram does
    assert len(sent) >= 3
    assert all(len(m["text"]) <= 4096 for m in sent)
    assert "```" not in "".join(m["text"] for m in sent) and "**" not in sent[0]["text"]
    assert sent[0]["text"].startswith("Here you go:")
    assert {"type": "bold", "offset": 5, "length": 3} in sent[0]["entities"]
    # the code block is code in every message it spans, never cut mid-line
    for message in sent[1:-1]:
        (pre,) = [e for e in message["entities"] if e["type"] == "pre"]
        assert (pre["offset"], pre["language"]) == (0, "python")
        assert message["text"].startswith("print(")
    code = "".join(m["text"][e["offset"] : e["offset"] + e["length"]] for m in sent for e in m["entities"] if e["type"] == "pre")
    assert code.replace("\n", "") == LONG_CODE.replace("\n", "")
    assert [m["chat_id"] for m in sent] == [42] * len(sent)
    assert [m["message_thread_id"] for m in sent] == [9] * len(sent)
    assert sent[0]["reply_parameters"]["message_id"] == 77
    assert all("reply_parameters" not in m for m in sent[1:])


async def test_plain_format_sends_the_text_as_written_and_keeps_code_fences(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    await make_adapter(format="plain").send(Outbound(chat="42", text=LONG_ANSWER))
    sent = fake.sent
    assert len(sent) >= 3 and all("entities" not in m for m in sent)
    assert all(len(m["text"]) <= 4096 for m in sent)
    assert all(m["text"].count("```") % 2 == 0 for m in sent), "every chunk must close its fence"
    assert all(m["text"].startswith("```python") for m in sent[1:])
    assert sent[0]["text"].startswith("Here **you** go:")
    joined = "\n".join(m["text"] for m in sent)
    assert all(f"# line {i:04d}" in joined for i in range(150))


async def test_send_counts_utf16_units(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    text = "🙂" * 3000  # 3000 characters, 6000 UTF-16 units: one 4096-char chunk would be refused
    await make_adapter().send(Outbound(chat="42", text=text))
    assert [c.status for c in fake.requests if c.method == "sendMessage"] == [200, 200]
    assert "".join(m["text"] for m in fake.sent) == text


async def test_approval_buttons_deliver_the_clickers_answer(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter, inbox = make_adapter(), Inbox()
    prompt = ApprovalPrompt(
        request_id="req-1", chat="-100", thread=None, requester="7",
        tool="shell", arguments=ApprovalArguments.of({"command": "rm -rf build"}), timeout_s=120,
    )
    await adapter.prompt_approval(prompt)
    (question,) = fake.sent
    assert "shell" in question["text"] and "rm -rf build" in question["text"]
    buttons = question["reply_markup"]["inline_keyboard"][0]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [("Approve", "ap:req-1:y"), ("Deny", "ap:req-1:n")]

    async with running(adapter, inbox):
        fake.press_button(user_id=99, text="Approve")
        fake.press_button(user_id=98, text="Deny")
        await inbox.wait(2)
        await fake.wait_for(lambda: len(fake.calls("answerCallbackQuery")) == 2)
    assert inbox.items == [
        ApprovalAnswer(channel="tg", request_id="req-1", sender="99", approved=True, chat="-100"),
        ApprovalAnswer(channel="tg", request_id="req-1", sender="98", approved=False, chat="-100"),
    ]
    assert [c["callback_query_id"] for c in fake.calls("answerCallbackQuery")] == ["cbq-1", "cbq-2"]


async def test_a_long_argument_is_fitted_to_one_message_not_refused(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    # 9,000 emoji are 18,000 UTF-16 units: the fake refuses a message over 4,096 units, as Telegram does
    arguments = ApprovalArguments.of({"content": "🙂" * 9000, "path": "notes.txt"})
    prompt = ApprovalPrompt(
        request_id="req-2", chat="42", thread=None, requester="7", tool="file_write", arguments=arguments, timeout_s=60
    )
    await make_adapter().prompt_approval(prompt)
    (question,) = fake.sent
    shown = question["text"].split("Arguments: ")[1].split("\nRequested by")[0]
    assert shown.startswith('{"content": "🙂🙂') and shown.endswith('🙂", "path": "notes.txt"}')
    assert "chars cut]…" in shown and "/approve req-2" in question["text"]
    units = len(question["text"].encode("utf-16-le")) // 2
    assert 4000 < units <= 4096  # the room one message has, not a fixed short preview


async def test_approve_and_deny_text_commands(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    inbox = Inbox()
    fake.push_message(chat_id=42, user_id=7, text="/approve req-9")
    fake.push_message(chat_id=-5, user_id=8, text="/deny@fake_bot req-10", chat_type="group")
    fake.push_message(chat_id=-5, user_id=8, text="/approve@other_bot req-11", chat_type="group")
    async with running(make_adapter(), inbox):
        await inbox.wait(3)
    assert inbox.items[:2] == [
        ApprovalAnswer(channel="tg", request_id="req-9", sender="7", approved=True, chat="42"),
        ApprovalAnswer(channel="tg", request_id="req-10", sender="8", approved=False, chat="-5"),
    ]
    assert isinstance(inbox.items[2], Inbound), "a command for another bot is plain text"


async def test_typing_sends_one_chat_action(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    await make_adapter().typing("42", "3")
    assert fake.calls("sendChatAction") == [{"chat_id": 42, "action": "typing", "message_thread_id": 3}]


async def test_send_waits_out_a_rate_limit(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=0.3)
    await make_adapter().send(Outbound(chat="42", text="after the flood"))
    attempts = [c for c in fake.requests if c.method == "sendMessage"]
    assert [c.status for c in attempts] == [429, 200]
    assert attempts[1].at - attempts[0].at >= 0.3
    assert [m["text"] for m in fake.sent] == ["after the flood"]


async def test_send_gives_up_after_bounded_retries(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=0.01, times=10)
    with pytest.raises(ChannelError, match="rate limited"):
        await make_adapter().send(Outbound(chat="42", text="never"))
    assert len(fake.calls("sendMessage")) == 4  # the first try and three retries
    assert fake.sent == []


async def test_bad_token_is_fatal_at_once(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter(token="env:TG_BAD")
    fatal: list[BaseException] = []
    began = time.monotonic()
    await asyncio.wait_for(
        supervise(adapter, Inbox(), on_ready=lambda: None, on_fatal=fatal.append, backoff=Backoff(base_s=0.01)), 5
    )
    assert time.monotonic() - began < 2
    assert len(fatal) == 1 and isinstance(fatal[0], ChannelAuthError)
    assert "rejected the bot token" in str(fatal[0]) and "wrong-token" not in str(fatal[0])
    assert [c.method for c in fake.requests] == ["getMe"], "no retry loop"
    with pytest.raises(ChannelAuthError):
        await adapter.send(Outbound(chat="42", text="x"))


@pytest.mark.parametrize("fault", ["dropped connection", "HTML 502 page"])
async def test_one_failed_poll_is_retried_in_place_and_the_channel_stays_up(
    fake: FakeTelegram, make_adapter: MakeAdapter, fault: str
) -> None:
    adapter, inbox = make_adapter(poll_timeout_s=5.0), Inbox()
    readies: list[float] = []
    async with asyncio.TaskGroup() as group:
        task = group.create_task(
            supervise(
                adapter, inbox, on_ready=lambda: readies.append(time.monotonic()),
                on_fatal=lambda exc: None, backoff=Backoff(base_s=0.01, cap_s=0.05),
            )
        )
        await fake.wait_for(lambda: fake.inflight("getUpdates") == 1)
        if fault == "dropped connection":
            assert fake.drop_connections() == 1
        else:  # a proxy in front of the Bot API answers the next poll with an HTML error page
            fake.fail_next("getUpdates", status=502, html=True)
            fake.drop_connections()
        update = fake.push_message(chat_id=42, user_id=7, text="still there?")
        (item,) = await inbox.wait(1)
        task.cancel()
    assert isinstance(item, Inbound) and item.event_id == str(update["update_id"])
    assert len(readies) == 1  # never torn down: the failed call was retried, not the channel
    assert len(fake.calls("deleteWebhook")) == 1


async def test_a_poll_that_keeps_failing_hands_over_to_the_supervisor(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    adapter, inbox = make_adapter(poll_timeout_s=5.0), Inbox()
    readies: list[float] = []
    fake.fail_next("getUpdates", status=502, html=True, times=5)  # more than the in-place retries
    async with asyncio.TaskGroup() as group:
        task = group.create_task(
            supervise(
                adapter, inbox, on_ready=lambda: readies.append(time.monotonic()),
                on_fatal=lambda exc: None, backoff=Backoff(base_s=0.01, cap_s=0.05),
            )
        )
        await fake.wait_for(lambda: len(readies) == 2, timeout=40)  # run raised, the supervisor re-ran it
        update = fake.push_message(chat_id=42, user_id=7, text="back?")
        (item,) = await inbox.wait(1)
        task.cancel()
    assert isinstance(item, Inbound) and item.event_id == str(update["update_id"])


async def test_failed_get_me_is_a_channel_error(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    fake.drop_next("getMe")
    with pytest.raises(ChannelError) as caught:
        await make_adapter().run(Inbox(), lambda: None)
    assert not isinstance(caught.value, ChannelAuthError)
    assert caught.value.reason.startswith("getMe:")


async def test_webhook_checks_secret_and_redelivers_on_failure(
    fake: FakeTelegram, make_adapter: MakeAdapter, unused_tcp_port: int
) -> None:
    url = f"http://127.0.0.1:{unused_tcp_port}/tg/hook"
    adapter = make_adapter(
        mode="webhook", webhook_url=url, webhook_port=unused_tcp_port, webhook_secret="env:TG_SECRET"
    )
    inbox, failures = Inbox(), [RuntimeError("store is down")]

    async def flaky(item: Inbound | ApprovalAnswer, /, *, synced: bool = True) -> None:
        if failures:
            raise failures.pop()
        await inbox(item)

    async with running(adapter, flaky):
        assert fake.webhook() == {
            "url": url, "secret_token": SECRET, "allowed_updates": ["message", "callback_query"], "max_connections": 40,
        }
        update = fake.push_message(chat_id=42, user_id=7, text="via webhook")
        (item,) = await inbox.wait(1)
        async with aiohttp.ClientSession() as session:
            for headers in ({"X-Telegram-Bot-Api-Secret-Token": "guess"}, {}):
                async with session.post(url, json=update, headers=headers) as response:
                    assert response.status == 403
        await asyncio.sleep(0.05)
    assert isinstance(item, Inbound) and item.event_id == str(update["update_id"])
    assert fake.webhook_attempts == [(update["update_id"], 500), (update["update_id"], 200)]
    assert len(inbox.items) == 1, "a forged update must not be delivered"
    assert fake.calls("getUpdates") == []


async def test_webhook_mode_without_secret_is_refused(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter(mode="webhook", webhook_url="https://example.invalid/hook")
    with pytest.raises(ChannelAuthError, match="webhook_secret"):
        await adapter.run(Inbox(), lambda: None)
    assert fake.calls("setWebhook") == []


async def test_links_telegram_cannot_open_are_shown_as_text(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    text = "See [the docs](https://example.org/docs), [notes](./notes.md) and [mail](mailto:a@b.c)."
    await make_adapter().send(Outbound(chat="42", text=text))
    (sent,) = fake.sent  # the fake refuses a text_link it could not open, as Telegram does
    assert sent["text"].rstrip() == "See the docs, notes and mail."
    assert sent["entities"] == [{"type": "text_link", "offset": 4, "length": 8, "url": "https://example.org/docs"}]


async def test_formatting_telegram_refuses_is_sent_again_as_plain_text(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    fake.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: unsupported")
    await make_adapter().send(Outbound(chat="42", text="Some **bold** words", reply_to="5"))
    refused, resent = fake.calls("sendMessage")
    assert refused["entities"] == [{"type": "bold", "offset": 5, "length": 4}]
    assert resent["text"] == refused["text"] and "entities" not in resent
    assert resent["reply_parameters"]["message_id"] == 5
    assert [m["text"] for m in fake.sent] == [resent["text"]]
