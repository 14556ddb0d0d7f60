"""Discord streamed replies through real discord.py against FakeDiscord's edits and rate limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from channels import ChannelAdapter, Outbound, StreamingAdapter, create_adapter
from channels.chunking import chunk_text
from channels.streaming import EditStream
from orchestrator.config.channels import DiscordChannelConfig
from tests.channels.test_discord import DM, THREAD, TOKEN, connected
from tests.fakes.discord_api import FakeDiscord

pytestmark = pytest.mark.slow

INTERVAL = 0.1
CHANNEL = "600000000000000001"
GUILD = "700000000000000001"

Make = Callable[..., ChannelAdapter]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=TOKEN) as server:
        await server.add_guild(GUILD, text_channels=[CHANNEL], threads={THREAD: CHANNEL})
        yield server


@pytest.fixture
async def make(fake: FakeDiscord) -> AsyncIterator[Make]:
    made: list[ChannelAdapter] = []

    def build(**overrides: Any) -> ChannelAdapter:
        fields: dict[str, Any] = {
            "kind": "discord",
            "token": "env:DISCORD_BOT_TOKEN",
            "api_base_url": fake.api_base_url,
            "guild_ready_timeout_s": 0.05,
            "stream_edit_interval_s": INTERVAL,
        }
        adapter = create_adapter("dc", DiscordChannelConfig.model_validate(fields | overrides), secrets=lambda _: TOKEN)
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        await adapter.aclose()


def stream_of(adapter: ChannelAdapter, message: Outbound) -> EditStream:
    assert isinstance(adapter, StreamingAdapter)
    stream = adapter.open_stream(message)
    assert isinstance(stream, EditStream)
    return stream


async def feed(stream: EditStream, text: str, *, steps: int, seconds: float) -> None:
    """Show `text` growing in `steps` over about `seconds`, as a model's deltas would."""
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


async def test_a_reply_streams_as_edits_then_one_final_message(fake: FakeDiscord, make: Make) -> None:
    final = words(120)
    adapter = make()
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=DM, text=""))
        await feed(stream, final[:-10], steps=40, seconds=1.2)
        await stream.finish(final)
    changes = [c for c in fake.messages.changes if c.channel_id == DM]
    assert fake.messages.visible(DM) == [final]
    assert [c.kind for c in changes].count("create") == 1
    assert len(changes) >= 4, "several visible updates"
    assert paced(changes), "more than one change per interval"
    assert fake.messages.rate_limited == 0
    assert stream.message_ids == (changes[0].message_id,)
    assert len({c.content for c in changes}) == len(changes), "an identical edit was sent"


async def test_the_first_message_replies_to_the_question(fake: FakeDiscord, make: Make) -> None:
    adapter = make()
    async with connected(adapter):
        question = await fake.push_message(CHANNEL, "424242424242424242", "q", guild_id=GUILD)
        stream = stream_of(adapter, Outbound(chat=CHANNEL, text="", reply_to=question))
        await stream.update("thinking about it")
        await stream.finish("the answer")
    assert str(fake.created_messages[0]["message_reference"]["message_id"]) == question
    assert fake.messages.visible(CHANNEL) == ["the answer"]


async def test_past_2000_characters_the_reply_continues_in_a_new_message(fake: FakeDiscord, make: Make) -> None:
    final = "Intro.\n\n```python\n" + "".join(f"value_{n} = {n} * {n}\n" for n in range(260)) + "```\nDone."
    assert len(final) > 4000
    adapter = make()
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=THREAD, text="", thread=THREAD))
        await feed(stream, final, steps=30, seconds=1.0)
        await stream.finish(final)
    assert fake.messages.visible(THREAD) == chunk_text(final, 2000)
    assert len(stream.message_ids) == 3
    sent = [r.body.get("content", "") for r in fake.requests if r.method in ("POST", "PATCH") and isinstance(r.body, dict)]
    assert sent and max(len(text) for text in sent) <= 2000, "an edit went past the limit"
    assert all(text.count("```") % 2 == 0 for text in fake.messages.visible(THREAD))


async def test_a_stricter_edit_limit_is_waited_out_and_the_user_sees_no_error(fake: FakeDiscord, make: Make) -> None:
    fake.messages.edit_limit, fake.messages.edit_window_s = 2, 0.6
    final = words(80)
    adapter = make(stream_edit_interval_s=0.02)  # faster than the fake allows
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=DM, text=""))
        await feed(stream, final, steps=30, seconds=0.6)
        await stream.finish(final)
    assert fake.messages.visible(DM) == [final]
    # discord.py read X-RateLimit-Remaining / Reset-After and waited for the bucket: no 429 at all
    assert fake.messages.rate_limited == 0
    assert len([c for c in fake.messages.changes if c.kind == "edit"]) >= 2


async def test_a_429_on_an_edit_is_retried_after_retry_after(fake: FakeDiscord, make: Make) -> None:
    adapter = make()
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=DM, text=""))
        await stream.update("first words")
        while not stream.message_ids:
            await asyncio.sleep(0.01)
        fake.fail_next("PATCH", "/channels/{id}/messages/{id}", status=429, retry_after=0.3)
        await stream.finish("first words and the rest")
    patches = [r for r in fake.requests if r.method == "PATCH"]
    assert len(patches) == 2, "the refused edit was sent once more, after the wait"
    assert fake.messages.visible(DM) == ["first words and the rest"]


async def test_abort_appends_the_ending_to_the_partial_reply(fake: FakeDiscord, make: Make) -> None:
    adapter = make()
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=DM, text=""))
        await stream.update("Half an ans")
        await fake.wait_until(lambda: bool(fake.messages.visible(DM)))
        await stream.abort("Stopped.")
    assert fake.messages.visible(DM) == ["Half an ans\n\nStopped."]


async def test_a_crashed_stream_is_followed_up_after_a_restart(fake: FakeDiscord, make: Make) -> None:
    adapter = make()
    async with connected(adapter):
        stream = stream_of(adapter, Outbound(chat=DM, text=""))
        await stream.update("partial text of a reply that")
        while not stream.message_ids:  # the id arrives with Discord's answer
            await asyncio.sleep(0.01)
        left = list(stream.message_ids)
    restarted = make()
    async with connected(restarted):
        assert isinstance(restarted, StreamingAdapter)
        await restarted.close_abandoned(DM, None, left, "The daemon restarted; this reply is incomplete.")
    assert fake.messages.visible(DM) == ["partial text of a reply that", "The daemon restarted; this reply is incomplete."]
    assert str(fake.created_messages[-1]["message_reference"]["message_id"]) == left[-1]


async def test_stream_false_opens_no_stream(make: Make) -> None:
    adapter = make(stream=False)
    assert isinstance(adapter, StreamingAdapter)
    async with connected(adapter):
        assert adapter.open_stream(Outbound(chat=DM, text="")) is None


async def test_two_replies_streaming_in_one_channel_share_its_pace_and_never_mix(fake: FakeDiscord, make: Make) -> None:
    adapter = make()
    first_text, second_text = words(60), " ".join(f"other{n}" for n in range(60))
    async with connected(adapter):
        first = stream_of(adapter, Outbound(chat=DM, text=""))
        second = stream_of(adapter, Outbound(chat=DM, text=""))

        async def run(stream: EditStream, text: str) -> None:
            await feed(stream, text, steps=15, seconds=0.8)
            await stream.finish(text)

        await asyncio.gather(run(first, first_text), run(second, second_text))
    assert sorted(fake.messages.visible(DM)) == sorted([first_text, second_text])
    assert set(first.message_ids).isdisjoint(second.message_ids)
    assert paced(fake.messages.changes), "the two streams together kept to one change per interval"
