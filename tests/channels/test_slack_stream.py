"""Slack streamed replies through real slack_sdk / slack-bolt against FakeSlack's streams and edits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels import Inbound, Outbound, StreamingAdapter
from channels.chunking import chunk_text
from channels.slack import SlackAdapter
from channels.slack_stream import SlackStream
from channels import StreamStatus
from tests.channels.test_slack import Inbox, make_adapter, running
from tests.fakes.slack_api import FakeSlack

pytestmark = pytest.mark.slow

INTERVAL = 0.1
THREAD = "1700000000.000100"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@asynccontextmanager
async def asked(fake: FakeSlack, *, thread: str | None = THREAD, **config: object) -> AsyncIterator[tuple[SlackAdapter, Inbound]]:
    """Run the adapter, deliver one question (in `thread`) and yield the adapter and the question."""
    adapter = make_adapter(fake, stream_edit_interval_s=INTERVAL, **config)
    inbox = Inbox()
    async with running(adapter, inbox):
        await fake.wait_connections(1)
        await fake.push_message("what is up?", user="U0001", thread_ts=thread)
        question = await inbox.next()
        assert isinstance(question, Inbound)
        yield adapter, question


def open_for(adapter: SlackAdapter, question: Inbound) -> SlackStream:
    assert isinstance(adapter, StreamingAdapter)
    stream = adapter.open_stream(Outbound(chat=question.chat, text="", thread=question.thread))
    assert stream is not None
    return stream


async def feed(stream: SlackStream, text: str, *, steps: int, seconds: float) -> None:
    for step in range(1, steps + 1):
        await stream.update(text[: len(text) * step // steps])
        await asyncio.sleep(seconds / steps)


def paced(changes: Sequence[Any], interval: float = INTERVAL) -> bool:
    """Return True when the changes came no faster than one per interval (loopback jitter allowed:
    the client spaces its requests, the fake records their arrival)."""
    span = changes[-1].at - changes[0].at
    return len(changes) - 1 <= span / interval + 2


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


async def test_a_thread_reply_is_a_chat_stream_appended_then_stopped(fake: FakeSlack) -> None:
    final = words(100) + " & <done>"
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        assert stream.native and isinstance(stream, StreamStatus)
        await stream.status("is thinking...")
        await feed(stream, words(100), steps=30, seconds=1.0)
        await stream.finish(final)
    starts = fake.calls("chat.startStream")
    assert len(starts) == 1
    assert starts[0].args["thread_ts"] == THREAD
    assert (starts[0].args["recipient_user_id"], starts[0].args["recipient_team_id"]) == ("U0001", "T0001")
    assert len(fake.calls("chat.appendStream")) >= 3, "several visible updates"
    assert len(fake.calls("chat.stopStream")) == 1
    assert fake.calls("chat.postMessage") == [] and fake.calls("chat.update") == []
    assert fake.messages.visible() == [final.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")]
    stream_changes = [c for c in fake.messages.changes if c.kind in ("stream_start", "append")]
    assert paced(stream_changes), "more than one call per interval"
    # the status said "is thinking..." first and was cleared at the end
    assert [status for _, _, _, status in fake.messages.statuses] == ["is thinking...", ""]


async def test_the_typing_status_is_cleared_when_the_stream_ends(fake: FakeSlack) -> None:
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await adapter.typing(question.chat, question.thread)
        await stream.update("the answer so far")
        await stream.finish("the answer")
    assert [status for _, _, _, status in fake.messages.statuses] == ["is thinking...", ""]


async def test_a_replaced_tool_line_stops_the_stream_and_edits_the_message(fake: FakeSlack) -> None:
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await stream.update("Let me look.")
        await asyncio.sleep(INTERVAL * 1.5)
        await stream.update("Let me look.\n\nrunning file_read...")
        await asyncio.sleep(INTERVAL * 1.5)
        await stream.update("Let me look. The file says hello.")
        await asyncio.sleep(INTERVAL * 1.5)
        await stream.finish("Let me look. The file says hello.")
    assert [c.method for c in fake.requests if c.method.startswith("chat.")] == [
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "chat.update",
    ]
    assert fake.messages.visible() == ["Let me look. The file says hello."]


async def test_missing_stream_scope_falls_back_to_post_and_update(fake: FakeSlack) -> None:
    fake.messages.stream_scope = False
    final = words(60)
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await feed(stream, final, steps=20, seconds=0.6)
        await stream.finish(final)
        second = open_for(adapter, question)
        assert not second.native, "the adapter remembers the workspace cannot stream"
    assert len(fake.calls("chat.startStream")) == 1
    assert len(fake.calls("chat.postMessage")) == 1
    assert len(fake.calls("chat.update")) >= 2
    assert fake.messages.visible() == [final]
    assert fake.posted[0]["thread_ts"] == THREAD


async def test_an_expired_stream_is_finished_by_chat_update(fake: FakeSlack) -> None:
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await stream.update("partial")
        while not stream.message_ids:
            await asyncio.sleep(0.01)
        fake.messages.expire_streams()  # Slack ends a stream after about 5 minutes
        await stream.finish("partial and the rest")
    assert [c.method for c in fake.requests if c.method.startswith("chat.")] == [
        "chat.startStream",
        "chat.appendStream",  # answered message_not_in_streaming_state
        "chat.update",
    ]
    assert fake.messages.visible() == ["partial and the rest"]


async def test_outside_a_thread_the_reply_is_posted_then_edited_and_overflows(fake: FakeSlack) -> None:
    final = "```\n" + "".join(f"line {n} of the listing\n" for n in range(400)) + "```"
    assert len(final) > 8000
    async with asked(fake, thread=None) as (adapter, question):
        stream = open_for(adapter, question)
        assert not stream.native
        await feed(stream, final, steps=20, seconds=0.8)
        await stream.finish(final)
    assert fake.calls("chat.startStream") == []
    assert fake.messages.visible() == chunk_text(final, 4000)
    sent = [c.args.get("text", "") for c in fake.requests if c.method in ("chat.postMessage", "chat.update")]
    assert max(len(text) for text in sent) <= 4000
    assert all(text.count("```") % 2 == 0 for text in fake.messages.visible())


async def test_abort_appends_the_ending_to_the_stream(fake: FakeSlack) -> None:
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await stream.update("Half an ans")
        while not stream.message_ids:
            await asyncio.sleep(0.01)
        await stream.abort("Stopped.")
    assert fake.messages.visible() == ["Half an ans\n\nStopped."]
    assert len(fake.calls("chat.stopStream")) == 1


async def test_a_refused_status_is_logged_once_and_not_asked_again(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake.messages.status_scope = False
    with caplog.at_level(logging.INFO, logger="channels"):
        async with asked(fake) as (adapter, question):
            stream = open_for(adapter, question)
            await stream.status("is thinking...")
            await stream.status("running file_read...")
            await stream.finish("fine")
    assert len(fake.calls("assistant.threads.setStatus")) == 1
    assert fake.messages.visible() == ["fine"]
    told = [r.getMessage() for r in caplog.records if "assistant status" in r.getMessage()]
    # the guidance is Slack's current one: the status takes chat:write, assistant:write is folded into it
    assert len(told) == 1 and "chat:write" in told[0] and "assistant:write" not in told[0]
    assert "Slack says it needs chat:write" in told[0]


async def test_a_crashed_stream_is_stopped_and_followed_up(fake: FakeSlack) -> None:
    async with asked(fake) as (adapter, question):
        stream = open_for(adapter, question)
        await stream.update("partial text")
        while not stream.message_ids:
            await asyncio.sleep(0.01)
        left = list(stream.message_ids)
    restarted = make_adapter(fake)
    async with restarted:
        await restarted.close_abandoned(question.chat, THREAD, left, "The daemon restarted; this reply is incomplete.")
    assert fake.messages.visible() == ["partial text", "The daemon restarted; this reply is incomplete."]
    assert fake.messages.messages[left[0]].state == "completed"
    assert fake.posted[-1]["thread_ts"] == THREAD


async def test_stream_false_opens_no_stream(fake: FakeSlack) -> None:
    adapter = make_adapter(fake, stream=False)
    assert adapter.open_stream(Outbound(chat="D0001", text="", thread=THREAD)) is None


async def test_a_429_on_chat_update_is_waited_out_not_shown(fake: FakeSlack) -> None:
    async with asked(fake, thread=None) as (adapter, question):
        stream = open_for(adapter, question)
        await stream.update("first words")
        while not stream.message_ids:
            await asyncio.sleep(0.01)
        fake.fail_next("chat.update", status=429, retry_after=1)
        await stream.finish("first words and the rest")
    assert len(fake.calls("chat.update")) == 2, "slack_sdk retried after Retry-After"
    assert fake.messages.visible() == ["first words and the rest"]
