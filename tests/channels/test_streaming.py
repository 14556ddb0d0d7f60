"""EditStream against a small in-test platform: pacing, coalescing, limits, overflow, endings."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from channels.base import ChannelError, ChannelRefused, ReplyProgress
from channels.streaming import RECENT_CHATS, EditStream, PacerBook, StreamRateLimited, split_to_limit

pytestmark = pytest.mark.slow

INTERVAL = 0.05


@dataclass
class Change:
    at: float
    kind: str  # "post" | "edit" | "delete"
    message_id: str
    text: str


@dataclass
class Platform:
    """A chat platform in miniature: messages by id, a limit, scripted failures, a change log."""

    limit: int = 100
    messages: dict[str, str] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    failures: list[ChannelError] = field(default_factory=list)  # raised by the next calls, in order
    refuse_edits_of: set[str] = field(default_factory=set)
    forbidden_until: float = 0.0  # a 429 answered before this loop time means we ignored retry_after
    violations: list[str] = field(default_factory=list)
    limit_next: float | None = None
    _next: int = 0

    def _check(self, text: str) -> None:
        now = asyncio.get_running_loop().time()
        if now < self.forbidden_until:
            self.violations.append(f"called {self.forbidden_until - now:.3f}s before retry_after elapsed")
        if self.limit_next is not None:
            retry_after, self.limit_next = self.limit_next, None
            self.forbidden_until = now + retry_after
            raise StreamRateLimited("fake", retry_after)
        if self.failures:
            raise self.failures.pop(0)
        if len(text) > self.limit:
            raise ChannelRefused("fake", f"message too long ({len(text)} > {self.limit})")
        if not text.strip():
            raise ChannelRefused("fake", "empty message")

    async def post(self, text: str) -> str:
        await asyncio.sleep(0)
        self._check(text)
        self._next += 1
        message_id = f"m{self._next}"
        self.messages[message_id] = text
        self.changes.append(Change(asyncio.get_running_loop().time(), "post", message_id, text))
        return message_id

    async def edit(self, message_id: str, text: str) -> None:
        await asyncio.sleep(0)
        self._check(text)
        if message_id in self.refuse_edits_of or message_id not in self.messages:
            raise ChannelRefused("fake", "message to edit not found")
        if self.messages[message_id] == text:
            raise ChannelRefused("fake", "message is not modified")
        self.messages[message_id] = text
        self.changes.append(Change(asyncio.get_running_loop().time(), "edit", message_id, text))

    async def delete(self, message_id: str) -> None:
        await asyncio.sleep(0)
        self._check("x")
        del self.messages[message_id]
        self.changes.append(Change(asyncio.get_running_loop().time(), "delete", message_id, ""))

    def rate_limit_next(self, retry_after: float) -> None:
        """Answer the next call 429 and record any call made within `retry_after` of it."""
        self.limit_next = retry_after

    def visible(self) -> list[str]:
        return list(self.messages.values())


def make_stream(platform: Platform, book: PacerBook | None = None, chat: str = "c1", **options: object) -> EditStream:
    pacers = book or PacerBook(INTERVAL)

    return EditStream(
        channel="fake",
        post=platform.post,
        edit=platform.edit,
        delete=platform.delete if options.pop("with_delete", True) else None,
        limit=platform.limit,
        pacer=pacers.pacer(chat),
        **options,  # type: ignore[arg-type]
    )


def gaps(changes: list[Change]) -> list[float]:
    return [b.at - a.at for a, b in zip(changes, changes[1:])]


async def stream_words(stream: EditStream, words: int, *, pause: float = 0.005) -> str:
    text = ""
    for index in range(words):
        text += f"w{index} "
        await stream.update(text)
        await asyncio.sleep(pause)
    return text


async def test_updates_coalesce_into_paced_edits_and_the_final_text_is_exact() -> None:
    platform = Platform(limit=1000)
    stream = make_stream(platform)
    text = await stream_words(stream, 60)  # 60 updates over ~0.3 s at a 0.05 s pace
    await stream.finish(text + "done")
    assert platform.visible() == [text + "done"]
    assert len(stream.message_ids) == 1
    assert platform.changes[0].kind == "post"
    assert 3 <= len(platform.changes) < 30, [c.text for c in platform.changes]  # several, far fewer than 60
    assert all(gap >= INTERVAL * 0.99 for gap in gaps(platform.changes))
    texts = [change.text for change in platform.changes]
    assert len(texts) == len(set(texts)), "a text was sent twice"


async def test_the_first_update_is_visible_before_update_returns_control_twice() -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("hello")
    for _ in range(5):
        await asyncio.sleep(0)
    assert platform.visible() == ["hello"]
    await stream.finish("hello world")
    assert platform.visible() == ["hello world"]


async def test_an_identical_text_is_never_resent() -> None:
    platform = Platform()
    stream = make_stream(platform)
    for _ in range(5):
        await stream.update("same")
        await asyncio.sleep(INTERVAL)
    await stream.finish("same")
    assert [change.kind for change in platform.changes] == ["post"]


async def test_a_rate_limit_holds_the_chat_for_retry_after() -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("one")
    await asyncio.sleep(INTERVAL * 1.5)
    platform.rate_limit_next(0.3)
    await stream.update("one two")
    await asyncio.sleep(INTERVAL * 2)
    await stream.update("one two three")
    await stream.finish("one two three four")
    assert platform.violations == []
    assert platform.visible() == ["one two three four"]


async def test_a_rate_limit_during_finish_is_waited_out() -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("partial")
    await asyncio.sleep(INTERVAL * 1.5)
    platform.rate_limit_next(0.2)
    await stream.finish("final")
    assert platform.violations == []
    assert platform.visible() == ["final"]


async def test_a_failed_intermediate_edit_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("a")
    await asyncio.sleep(INTERVAL * 1.5)
    platform.failures.append(ChannelError("fake", "HTTP 502"))
    with caplog.at_level(logging.WARNING, logger="channels.streaming"):
        await stream.update("a b")
        await asyncio.sleep(INTERVAL * 3)
    assert "stream update failed" in caplog.text
    assert platform.visible() == ["a b"]  # the next flush retried with the newest text
    await stream.finish("a b c")
    assert platform.visible() == ["a b c"]


async def test_persistent_failures_rest_the_flusher_and_finish_still_raises_clearly() -> None:
    platform = Platform()
    stream = make_stream(platform)
    platform.failures.extend(ChannelError("fake", "HTTP 502") for _ in range(3))
    await stream.update("lost")
    await asyncio.sleep(INTERVAL * 5)
    assert platform.visible() == [] and platform.failures == []
    await stream.finish("the answer")
    assert platform.visible() == ["the answer"]


async def test_overflow_continues_in_a_new_message_with_fences_balanced() -> None:
    platform = Platform(limit=60)
    stream = make_stream(platform)
    code = "```python\n" + "".join(f"x = {n}\n" for n in range(20)) + "```\nafter"
    for end in range(10, len(code) + 1, 7):
        await stream.update(code[:end])
        await asyncio.sleep(INTERVAL / 3)
    await stream.finish(code)
    shown = platform.visible()
    assert len(shown) >= 3 and len(stream.message_ids) == len(shown)
    assert all(len(text) <= 60 for change in platform.changes for text in [change.text])
    for text in shown:
        assert text.count("```") % 2 == 0, text
    assert shown == split_to_limit(code, 60)


async def test_finish_follows_reply_progress() -> None:
    platform = Platform(limit=40)
    stream = make_stream(platform)
    text = " ".join(f"word{n}" for n in range(30))
    accepted: list[int] = []
    progress = ReplyProgress(on_advance=accepted.append)
    await stream.finish(text, progress=progress)
    chunks = split_to_limit(text, 40)
    assert accepted == list(range(1, len(chunks) + 1))
    # a retried finish with everything accepted changes nothing
    before = len(platform.changes)
    await stream.finish(text, progress=ReplyProgress(done=len(chunks)))
    assert len(platform.changes) == before
    assert platform.visible() == chunks


async def test_a_retried_finish_resumes_after_the_accepted_chunks() -> None:
    platform = Platform(limit=40)
    stream = make_stream(platform)
    text = " ".join(f"word{n}" for n in range(30))
    chunks = split_to_limit(text, 40)
    await stream.update(chunks[0])
    await asyncio.sleep(INTERVAL)
    progress = ReplyProgress()
    platform.failures.append(ChannelError("fake", "HTTP 502"))
    with pytest.raises(ChannelError):
        # chunk 1 is already shown (no call), chunk 2's post fails
        await stream.finish(text, progress=progress)
    assert progress.done == 1
    await stream.finish(text, progress=progress)
    assert progress.done == len(chunks)
    assert platform.visible() == chunks
    assert [c.kind for c in platform.changes].count("post") == len(chunks)


async def test_finish_removes_messages_the_final_text_no_longer_needs() -> None:
    platform = Platform(limit=40)
    stream = make_stream(platform)
    long = " ".join(f"word{n}" for n in range(20))
    await stream.update(long)
    while len(stream.message_ids) < 2:
        await asyncio.sleep(INTERVAL / 2)
    await stream.finish("short")
    assert platform.visible() == ["short"]
    assert "delete" in [c.kind for c in platform.changes]


async def test_without_delete_a_surplus_message_is_emptied() -> None:
    platform = Platform(limit=40)
    stream = make_stream(platform, with_delete=False)
    await stream.update(" ".join(f"word{n}" for n in range(20)))
    while len(stream.message_ids) < 2:
        await asyncio.sleep(INTERVAL / 2)
    await stream.finish("short")
    assert platform.visible() == ["short", "…"]


async def test_a_message_deleted_mid_stream_gets_the_final_text_posted_anew() -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("draft")
    await asyncio.sleep(0.01)
    first = stream.message_ids[0]
    platform.refuse_edits_of.add(first)
    del platform.messages[first]
    await stream.finish("final")
    assert platform.visible() == ["final"]
    assert stream.message_ids[0] != first


async def test_abort_appends_the_ending_to_the_partial_text() -> None:
    platform = Platform()
    stream = make_stream(platform)
    await stream.update("half a sen")
    await asyncio.sleep(0.01)
    await stream.update("half a sentence")  # pending when the abort comes
    await stream.abort("Stopped.")
    assert platform.visible() == ["half a sen\n\nStopped."]
    await stream.update("late text")  # ignored after the end
    await asyncio.sleep(INTERVAL * 2)
    assert platform.visible() == ["half a sen\n\nStopped."]


async def test_abort_posts_the_ending_when_it_does_not_fit_or_nothing_was_shown() -> None:
    platform = Platform(limit=30)
    stream = make_stream(platform)
    await stream.abort("the model failed, try again")
    assert platform.visible() == ["the model failed, try again"]
    other = Platform(limit=30)
    full = make_stream(other)
    await full.update("x" * 28)
    await asyncio.sleep(0.01)
    await full.abort("Stopped.")
    assert other.visible() == ["x" * 28, "Stopped."]


async def test_two_streams_in_one_chat_share_the_pace_and_never_mix() -> None:
    platform = Platform(limit=1000)
    book = PacerBook(INTERVAL)
    first, second = make_stream(platform, book), make_stream(platform, book)

    async def run(stream: EditStream, tag: str) -> None:
        text = ""
        for index in range(20):
            text += f"{tag}{index} "
            await stream.update(text)
            await asyncio.sleep(0.005)
        await stream.finish(text.strip())

    await asyncio.gather(run(first, "a"), run(second, "b"))
    assert all(gap >= INTERVAL * 0.99 for gap in gaps(platform.changes))
    shown = platform.visible()
    assert sorted(shown) == sorted([" ".join(f"a{i}" for i in range(20)), " ".join(f"b{i}" for i in range(20))])


async def test_the_limit_is_measured_as_the_platform_measures() -> None:
    def utf16(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    chunks = split_to_limit("😀 " * 40, 40, utf16)
    assert all(utf16(chunk) <= 40 for chunk in chunks)
    assert "".join(chunks).replace(" ", "") == "😀" * 40


async def test_render_is_applied_before_measuring() -> None:
    platform = Platform(limit=20)
    stream = make_stream(platform, render=lambda text: text.replace("&", "&amp;"))
    await stream.finish("a & b & c & d & e & f")
    assert all(len(text) <= 20 for text in platform.visible())
    assert "".join(platform.visible()).count("&amp;") == 5


async def test_an_unexpected_error_in_an_intermediate_call_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    platform = Platform()
    calls = 0

    async def broken_post(text: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("adapter bug")
        return await platform.post(text)

    stream = EditStream(channel="fake", post=broken_post, edit=platform.edit, limit=100, pacer=PacerBook(INTERVAL).pacer("c"))
    with caplog.at_level(logging.ERROR, logger="channels.streaming"):
        await stream.update("first")
        await asyncio.sleep(INTERVAL * 3)
    assert "failed unexpectedly" in caplog.text
    await stream.finish("final")
    assert platform.visible() == ["final"]


async def test_a_message_posted_below_the_stream_moves_the_reply_under_it() -> None:
    platform = Platform()
    book = PacerBook(INTERVAL)
    stream = make_stream(platform, book)
    await stream.update("running file_write...")
    while not stream.message_ids:
        await asyncio.sleep(0.005)
    prompt = await platform.post("Approve file_write?")  # the adapter's own message, below the stream
    book.pacer("c1").posted_by_other()
    await stream.update("done, the file is written")
    async with asyncio.timeout(5):  # the removal and the new post take one pacer slot each
        while platform.visible() != ["Approve file_write?", "done, the file is written"]:
            await asyncio.sleep(INTERVAL / 2)
    await stream.finish("Done: the file is written.")
    assert platform.visible() == ["Approve file_write?", "Done: the file is written."]
    assert prompt not in stream.message_ids and len(stream.message_ids) == 1


async def test_finish_moves_the_reply_below_a_message_posted_after_it() -> None:
    platform = Platform()
    book = PacerBook(INTERVAL)
    stream = make_stream(platform, book, with_delete=False)
    await stream.update("partial")
    while not stream.message_ids:
        await asyncio.sleep(0.005)
    await platform.post("Only the person who asked can answer.")
    book.pacer("c1").posted_by_other()
    await stream.finish("final")
    assert platform.visible() == ["…", "Only the person who asked can answer.", "final"]


async def test_the_pace_counts_from_when_a_slow_call_arrived() -> None:
    platform = Platform()
    slow = [INTERVAL * 3]  # the next edit reaches the platform late (a slow network, a busy loop)

    async def edit(message_id: str, text: str) -> None:
        if slow:
            await asyncio.sleep(slow.pop())
        await platform.edit(message_id, text)

    stream = EditStream(channel="fake", post=platform.post, edit=edit, limit=platform.limit, pacer=PacerBook(INTERVAL).pacer("c1"))
    await stream.update("first words")
    await platform_waits_for(lambda: len(platform.changes) == 1)
    await stream.update("first words and more")  # the late edit
    await asyncio.sleep(INTERVAL * 1.5)  # its slot has passed while it is still on its way
    await stream.finish("first words and more, all of it")
    kinds = [c.kind for c in platform.changes]
    assert kinds == ["post", "edit", "edit"]
    # the final edit came after the late one had arrived and a whole interval more
    assert all(gap >= INTERVAL * 0.99 for gap in gaps(platform.changes)[1:])


async def platform_waits_for(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.001)


async def test_a_reply_ending_while_its_edit_settles_gets_its_final_text_into_that_slot() -> None:
    platform = Platform(limit=1000)
    pacer = PacerBook(1.2).pacer("c1")  # settles 0.3 s: room for a loaded machine to see the slot open
    stream = EditStream(channel="fake", post=platform.post, edit=platform.edit, limit=platform.limit, pacer=pacer)
    await stream.update("the first words")
    await platform_waits_for(lambda: len(platform.changes) == 1)
    await stream.update("the first words and some more")
    await platform_waits_for(lambda: pacer.calls == 2)  # the edit's slot opened: it settles now
    await stream.finish("the first words and some more, and the end")
    assert [(c.kind, c.text) for c in platform.changes] == [
        ("post", "the first words"), ("edit", "the first words and some more, and the end"),
    ]
    assert pacer.calls == 2  # the final edit went out in the given-back slot, not one interval later


async def test_a_slot_is_given_back_only_when_nothing_happened_since() -> None:
    book = PacerBook(0.2)
    pacer = book.pacer("c1")
    first = await pacer.slot()
    pacer.give_back(first)
    assert (await pacer.slot()).waited_s == 0  # given back: the next taker goes at once
    taken = await pacer.slot()  # waited for
    assert taken.waited_s > 0
    pacer.hold(0.3)  # a 429 for another stream of the chat
    pacer.give_back(taken)
    assert (await pacer.slot()).waited_s > 0.2  # the hold stands
    answered = await pacer.slot()
    pacer.answered()  # a call was made in it
    pacer.give_back(answered)
    assert (await pacer.slot()).waited_s > 0.1


def test_a_pacer_book_stays_bounded_over_many_chats_and_keeps_a_pacer_a_stream_holds() -> None:
    book = PacerBook(INTERVAL)
    streaming = book.pacer("busy")  # held, as a live stream holds its chat's pacer
    streaming.posted_by_other()
    for chat in range(10 * RECENT_CHATS):  # a bot meeting new chats for weeks
        book.pacer(f"chat-{chat}")
    assert book.size() == RECENT_CHATS
    assert book.pacer("busy") is streaming  # what the stream counts is what a later post counts
    assert book.pacer(f"chat-{10 * RECENT_CHATS - 1}") is book.pacer(f"chat-{10 * RECENT_CHATS - 1}")
