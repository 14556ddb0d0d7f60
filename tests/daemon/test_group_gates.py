"""Group gates on every platform: in a group the bot takes only what is addressed to it (issue #28 item 1).

Each test runs once per real adapter and fake (`GroupChat` in chats.py). The route's gate is
resolved in the seam (`resolve_group_gate`); the adapters only report facts.
"""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.daemon.whoami import WhoamiLimit
from tests.conftest import WriteConfig
from tests.daemon.chats import ALL_CHATS, TELEGRAM_GROUP, GroupChat, TelegramChat
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, text

pytestmark = pytest.mark.slow

all_chats = pytest.mark.parametrize("chat", ALL_CHATS, indirect=True)


def seen_by_model(fake_llm: FakeOpenAI) -> list[str]:
    """Return the last user message of every model request, in order."""
    return [[m for m in r["messages"] if m["role"] == "user"][-1]["content"] for r in fake_llm.requests]


@all_chats
async def test_people_talking_among_themselves_make_no_model_call_and_a_mention_makes_one(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: GroupChat
) -> None:
    path = write_config(chat.group_toml(fake_llm))
    fake_llm.script(text("It is noon."), text("Glad to help."))
    async with daemon(path):
        await chat.say("lunch at noon, anyone?")
        await chat.mention_other("yes, see you there")
        await chat.settle()
        await chat.mention_bot("what time is it?")
        answer = await chat.wait_text("It is noon.")
        assert chat.chat_of(answer) == chat.group
        await chat.reply_to_bot("thanks!")  # a reply to the bot needs no mention
        await chat.wait_text("Glad to help.")
        await chat.settle()
    assert seen_by_model(fake_llm) == ["what time is it?", "thanks!"]  # the mention cut out


@all_chats
async def test_a_command_to_the_bot_is_taken_and_one_to_another_bot_is_not(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: GroupChat
) -> None:
    path = write_config(chat.group_toml(fake_llm))
    async with daemon(path):
        await chat.command("/help", to_other_bot=True)
        await chat.settle()
        await chat.command("/help")
        await chat.wait_text("Commands here:")
        await chat.settle()
    assert len([t for t in chat.texts() if "Commands here:" in t]) == 1
    assert fake_llm.requests == []


@all_chats
async def test_a_wake_word_is_taken_and_other_chatter_is_not(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: GroupChat
) -> None:
    path = write_config(chat.group_toml(fake_llm, route_extra='wake_words = ["Ops"]'))
    fake_llm.script(text("Deploying now."))
    async with daemon(path):
        await chat.say("the ops team is out today")  # the word, but not at the start
        await chat.say("opsie daisy")  # not a whole word
        await chat.settle()
        await chat.say("OPS, deploy the fix please")
        await chat.wait_text("Deploying now.")
        await chat.settle()
    assert seen_by_model(fake_llm) == ["OPS, deploy the fix please"]


@all_chats
async def test_reply_in_groups_all_takes_every_message_but_a_command_to_another_bot(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: GroupChat
) -> None:
    path = write_config(chat.group_toml(fake_llm, route_extra='reply_in_groups = "all"'))
    fake_llm.script(text("first answer"), text("second answer"))
    async with daemon(path):
        await chat.command("/help", to_other_bot=True)
        await chat.say("lunch at noon, anyone?")
        await chat.wait_text("first answer")
        await chat.mention_other("yes, see you there")
        await chat.wait_text("second answer")
        await chat.settle()
    assert len(fake_llm.requests) == 2 and seen_by_model(fake_llm)[0] == "lunch at noon, anyone?"


@all_chats
async def test_direct_messages_need_no_mention(write_config: WriteConfig, fake_llm: FakeOpenAI, chat: GroupChat) -> None:
    path = write_config(chat.group_toml(fake_llm))
    fake_llm.script(text("hello in private"))
    async with daemon(path):
        await chat.push_dm("just a plain message")
        post: dict[str, Any] = await chat.wait_text("hello in private")
    assert chat.chat_of(post) == chat.dm and seen_by_model(fake_llm) == ["just a plain message"]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_telegram_privacy_mode_withholds_chatter_and_an_admin_bot_is_gated_alike(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: TelegramChat
) -> None:
    path = write_config(chat.group_toml(fake_llm))
    fake_llm.script(text("answer one"), text("answer two"))
    async with daemon(path):
        chat.fake.set_privacy(True)  # BotFather's default: Telegram withholds the chatter itself
        withheld = chat.fake.push_message(TELEGRAM_GROUP, 11, "lunch at noon, anyone?", chat_type="supergroup")
        assert withheld.get("withheld") is True
        await chat.mention_bot("first question")
        await chat.wait_text("answer one")
        chat.fake.set_privacy(True, admin_in=[TELEGRAM_GROUP])  # an admin bot gets everything: the gate decides
        await chat.say("lunch at noon, anyone?", user="11")
        await chat.mention_other("yes, see you there")
        await chat.settle()
        await chat.mention_bot("second question")
        await chat.wait_text("answer two")
    assert seen_by_model(fake_llm) == ["first question", "second question"]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_telegram_text_mention_is_taken_and_cut_and_a_message_via_the_bot_is_not(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: TelegramChat
) -> None:
    path = write_config(chat.group_toml(fake_llm))
    fake_llm.script(text("done"))
    async with daemon(path):
        bot = chat.fake.bot_user()
        chat.fake.push_message(TELEGRAM_GROUP, 10, "@ops_bot result", chat_type="supergroup", via_bot=bot)
        await chat.settle()
        chat.fake.push_message(
            TELEGRAM_GROUP, 10, "Ops Bot, what is 2+2?", chat_type="supergroup", text_mentions=[("Ops Bot", bot)]
        )
        await chat.wait_text("done")
    assert seen_by_model(fake_llm) == ["what is 2+2?"]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_whoami_tells_a_stranger_their_ids_once_a_minute_and_runs_no_turn(
    write_config: WriteConfig, fake_llm: FakeOpenAI, chat: TelegramChat
) -> None:
    path = write_config(chat.group_toml(fake_llm))
    async with daemon(path):
        chat.fake.push_message(99, 99, "/whoami")  # user 99 is in no route's senders
        chat.fake.push_message(99, 99, "/whoami")
        await chat.settle()
        answer = await chat.wait_text("Your user id on ops_bot: 99")
        chat.fake.push_message(10, 10, "/whoami")  # ALICE, admitted
        admitted = await chat.wait_text("Your user id on ops_bot: 10")
        await chat.command("/whoami")  # ALICE again, in the group, within the minute: not answered
        group = {"chat_type": "supergroup"}
        chat.fake.push_message(TELEGRAM_GROUP, 11, "/whoami@other_bot", **group)  # another bot's: not answered
        chat.fake.push_message(TELEGRAM_GROUP, 11, "/whoami@ops_bot", **group)  # BOB's first
        in_group = await chat.wait_text(f"This chat's id: {TELEGRAM_GROUP}")
        await chat.settle()
    assert chat.text_of(answer) == (
        "Your user id on ops_bot: 99\nThis chat's id: 99\n"
        "No route admits you here: an admin can add your id to a route's senders."
    )
    assert "You are answered by agent 'ops' (routes[0])." in chat.text_of(admitted)
    assert chat.chat_of(in_group) == str(TELEGRAM_GROUP) and "Your user id on ops_bot: 11" in chat.text_of(in_group)
    answers = [t for t in chat.texts() if t.startswith("Your user id")]
    assert answers == [chat.text_of(answer), chat.text_of(admitted), chat.text_of(in_group)]
    assert fake_llm.requests == []


def test_whoami_answers_each_sender_once_a_minute_per_channel() -> None:
    limit = WhoamiLimit()
    assert limit.allow("tg", "99", now=1000.0) and not limit.allow("tg", "99", now=1059.0)
    assert limit.allow("tg", "98", now=1059.0) and limit.allow("slack", "99", now=1059.0)  # another sender, channel
    assert limit.allow("tg", "99", now=1060.0)  # a minute later
