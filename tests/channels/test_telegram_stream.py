"""The Telegram adapter's streamed replies (PTB against the fake Bot API): pacing, 429s,
"message is not modified", drafts, continuing past 4,096 units, the final entities."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import telegram
from loguru import logger
from packaging.requirements import Requirement

from channels import Outbound, ReplyProgress, StreamingAdapter, create_adapter
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

GROUP, USER = -700, 70
MakeAdapter = Callable[..., StreamingAdapter]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(edit_gap_s=0.1) as server:
        server.push_message(GROUP, USER, "hi", chat_type="group")  # the fake learns the chat's type
        server.push_message(USER, USER, "hi")
        yield server


@pytest.fixture
async def make_adapter(fake: FakeTelegram) -> AsyncIterator[MakeAdapter]:
    made: list[Any] = []

    def secrets(ref: SecretRef) -> str:
        return fake.token

    def make(**overrides: Any) -> StreamingAdapter:
        raw = {"kind": "telegram", "token": "env:TG", "api_base_url": fake.api_base_url, "stream_edit_interval_s": 0.15}
        adapter = create_adapter("tg", TelegramChannelConfig.model_validate(raw | overrides), secrets=secrets)
        assert isinstance(adapter, StreamingAdapter)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        await adapter.aclose()


async def settle(fake: FakeTelegram, count: int) -> None:
    """Wait until the fake saw `count` visible changes."""
    await fake.wait_for(lambda: len(fake.visible) >= count)


async def test_updates_faster_than_the_interval_are_coalesced_and_never_flood(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter().open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    text = "t"
    for i in range(60):  # 60 updates 10 ms apart, each a new text
        text += f" t{i}"
        await stream.update(text)
        await asyncio.sleep(0.01)
    await stream.finish(text)
    changes = [v for v in fake.visible if v.chat_id == GROUP]
    assert changes[0].kind == "send" and changes[-1].text == text
    assert 2 <= len(changes) < 30  # coalesced: far fewer changes than updates
    assert fake.rate_limited == 0
    assert len(stream.message_ids) == 1


async def test_a_429_holds_the_chat_for_retry_after_and_the_text_still_arrives(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter().open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("first")
    await settle(fake, 1)
    fake.fail_next("editMessageText", status=429, retry_after=0.4)
    await stream.update("first second")
    await fake.wait_for(lambda: any(c.status == 429 for c in fake.requests))
    refused_at = next(c.at for c in fake.requests if c.status == 429)
    await stream.update("first second third")
    await fake.wait_for(lambda: fake.shown(GROUP) == ["first second third"])
    edit = next(c for c in fake.requests if c.method == "editMessageText" and c.status == 200)
    assert edit.at - refused_at >= 0.4  # nothing was sent to the chat before retry_after passed
    await stream.finish("first second third")
    assert fake.shown(GROUP) == ["first second third"]


async def test_an_identical_final_text_is_not_modified_and_counts_as_done(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter(format="plain").open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("the answer")
    await settle(fake, 1)
    progress = ReplyProgress()
    await stream.finish("the answer", progress=progress)
    assert progress.done == 1
    assert [v.kind for v in fake.visible] == ["send"]  # no edit to the same text


async def test_a_final_text_already_shown_as_it_is_takes_no_slot(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter(format="plain")
    stream = adapter.open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("the answer")
    await settle(fake, 1)
    await stream.update("the answer, all of it")
    await settle(fake, 2)
    pacer = adapter._pacers.pacer(str(GROUP))  # type: ignore[attr-defined]
    taken = pacer.calls
    await stream.finish("the answer, all of it")
    assert pacer.calls == taken  # no wait of an interval for a call that is not needed
    assert [v.kind for v in fake.visible] == ["send", "edit"]


async def test_a_streamed_message_deleted_before_the_final_edit_gets_the_answer_posted_anew(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter(format="plain").open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("the first half")
    await settle(fake, 1)
    fake.delete_as_admin(int(stream.message_ids[0]))
    progress = ReplyProgress()
    await stream.finish("the first half and the rest", progress=progress)
    assert fake.shown(GROUP) == ["the first half and the rest"]
    assert progress.done == 1
    assert [v.kind for v in fake.visible] == ["send", "delete", "send"]


async def test_a_markdown_final_edit_carries_entities(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    stream = make_adapter().open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("some **bold")  # half-written Markdown is shown as it is
    await settle(fake, 1)
    assert fake.shown(GROUP) == ["some **bold"]
    await stream.finish("some **bold** text")
    [edit] = [c.payload for c in fake.requests if c.method == "editMessageText" and c.status == 200][-1:]
    assert edit["text"] == "some bold text"
    assert [e["type"] for e in edit["entities"]] == ["bold"]


async def test_past_4096_units_the_stream_continues_in_a_new_message_with_code_kept(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter(format="plain").open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    code = "\n".join(f"line_{i:04d} = {i}" for i in range(400))  # about 6,400 characters of code
    text = f"Here:\n```python\n{code}\n```\ndone"
    await stream.update(text[:3000])
    await settle(fake, 1)
    await stream.update(text)
    await fake.wait_for(lambda: len(stream.message_ids) == 2)
    await stream.finish(text)
    first, second = fake.shown(GROUP)
    assert first.count("```") % 2 == 0 and second.count("```") % 2 == 0  # each message's fence closed
    assert second.startswith("```")  # and reopened in the next
    assert len(first.encode("utf-16-le")) // 2 <= 4096
    assert fake.rate_limited == 0


async def test_a_shorter_final_text_deletes_the_messages_it_no_longer_needs(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter(format="plain").open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("x " * 3000)  # 6,000 characters: two messages
    await fake.wait_for(lambda: len(stream.message_ids) == 2)
    await stream.finish("short after all")
    assert fake.shown(GROUP) == ["short after all"]
    assert [v.kind for v in fake.visible][-1] == "delete"


async def test_a_private_chat_streams_a_draft_and_ends_in_one_message(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    stream = make_adapter().open_stream(Outbound(chat=str(USER), text="", reply_to="1"))
    assert stream is not None
    await stream.update("drafting")
    await settle(fake, 1)
    await stream.update("drafting " + "y" * 5000)  # past one message: the draft shows the last part
    await fake.wait_for(lambda: len(fake.visible) == 2)
    await stream.finish("the *final* answer")
    drafts = [c.payload for c in fake.requests if c.method == "sendMessageDraft"]
    assert len(drafts) == 2 and drafts[0]["draft_id"] == drafts[1]["draft_id"] != 0
    assert len(drafts[1]["text"].encode("utf-16-le")) // 2 <= 4096
    [sent] = fake.sent
    assert sent["text"] == "the final answer" and sent["entities"][0]["type"] == "italic"
    assert sent["reply_parameters"]["message_id"] == 1
    assert stream.message_ids == ()


async def test_the_fake_refuses_drafts_outside_private_chats(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    bot = adapter.bot  # type: ignore[attr-defined]
    from telegram.error import BadRequest

    with pytest.raises(BadRequest, match="private chats"):
        await bot.send_message_draft(chat_id=GROUP, draft_id=1, text="no")


async def test_a_server_without_drafts_turns_them_off_once_and_streams_by_edits(
    fake: FakeTelegram, make_adapter: MakeAdapter
) -> None:
    fake.without_drafts = True  # a self-hosted Bot API server older than sendMessageDraft
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG", format="{message}")
    try:
        adapter = make_adapter()
        first = adapter.open_stream(Outbound(chat=str(USER), text="", reply_to="1"))
        second = adapter.open_stream(Outbound(chat=str(USER), text=""))  # open while drafts still look on
        assert first is not None and second is not None
        await first.update("thinking about it")
        await second.update("and another reply")
        await fake.wait_for(lambda: len(fake.sent) == 2)  # each posted as a message once the draft was refused
        await first.update("thinking about it some more")
        await fake.wait_for(lambda: "thinking about it some more" in fake.shown(USER))  # then edited
        await first.finish("the first answer")
        await second.finish("the second answer")
        third = adapter.open_stream(Outbound(chat=str(USER), text=""))  # opened after: no draft is tried
        assert third is not None
        await third.update("a third")
        await fake.wait_for(lambda: len(fake.sent) == 3)
        await third.finish("the third answer")
    finally:
        logger.remove(sink)
    assert len(fake.calls("sendMessageDraft")) == 1  # found out once, for the bot
    # the first two posted in the order the pacer gave them slots
    assert sorted(fake.shown(USER)) == ["the first answer", "the second answer", "the third answer"]
    assert [sent.get("reply_parameters") is not None for sent in fake.sent].count(True) == 1  # the first's
    told = [line for line in lines if "sendMessageDraft" in line]
    assert len(told) == 1 and "'Not Found'" in told[0] and "older than Bot API 9.3" in told[0]
    assert not any("bot token" in line or "stream update failed" in line for line in lines)


async def test_abort_appends_the_ending_to_the_partial_text(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    stream = make_adapter().open_stream(Outbound(chat=str(GROUP), text=""))
    assert stream is not None
    await stream.update("half an answer\n\nrunning file_read...")
    await settle(fake, 1)
    await stream.abort("Stopped.")
    assert fake.shown(GROUP) == ["half an answer\n\nStopped."]


async def test_close_abandoned_answers_the_half_shown_message(fake: FakeTelegram, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    await adapter.close_abandoned(str(GROUP), None, ["77"], "I was restarted while answering.")
    [sent] = fake.sent
    assert sent["text"] == "I was restarted while answering."
    assert sent["reply_parameters"]["message_id"] == 77


def test_the_dependency_range_admits_only_releases_with_drafts() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    (ptb,) = [Requirement(r) for r in project["project"]["dependencies"] if Requirement(r).name == "python-telegram-bot"]
    # 22.6 brought Bot API 9.3 and Bot.send_message_draft, which private replies stream with
    assert "22.5" not in ptb.specifier and "22.6" in ptb.specifier
    assert version("python-telegram-bot") in ptb.specifier and hasattr(telegram.Bot, "send_message_draft")
