"""The daemon with a real Discord adapter (discord.py) against the fake Discord and the fake LLM.

What Discord shares with the other platforms runs in test_chat_platforms.py; this is Discord's own.
"""

from __future__ import annotations

import pytest

from tests.conftest import WriteConfig
from tests.daemon.chats import (
    DISCORD_ALICE as ALICE,
    DISCORD_BOB as BOB,
    DISCORD_CAROL as CAROL,
    DISCORD_CHANNEL as CHANNEL,
    DISCORD_DM as DM,
    DISCORD_GUILD as GUILD,
    discord_ask_for_approval as ask_for_approval,
    discord_click as click,
    discord_toml,
    posts,
    wait_post,
)
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.slow


async def test_dm_in_reply_out_with_agent_prompt_and_tools(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord, typing_after_s=0))
    fake_llm.default = echo_model
    async with daemon(path):
        message_id = await discord.push_message(DM, ALICE, "hello ops")
        reply = await wait_post(discord, "ops-model: hello ops")
    assert reply["channel_id"] == DM
    assert str(reply["message_reference"]["message_id"]) == message_id  # answers the question it replies to
    (request,) = fake_llm.requests
    assert request["messages"][0] == {"role": "system", "content": "You are ops on Discord."}
    assert sorted(t["function"]["name"] for t in request["tools"]) == ["file_write", "list_dir"]
    assert request["messages"][-1] == {"role": "user", "content": "hello ops"}
    assert DM in discord.typing  # the typing indicator ran while the turn did


async def test_a_quick_answer_shows_no_typing_indicator(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    # typing_after_s = 0.5 (the default): an instant model answers well before it
    path = write_config(discord_toml(fake_llm, discord))
    fake_llm.default = echo_model
    async with daemon(path):
        await discord.push_message(DM, ALICE, "quick one")
        await wait_post(discord, "ops-model: quick one")
    assert discord.typing == []


async def test_guild_message_needs_a_mention_but_a_dm_does_not(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord))
    fake_llm.default = echo_model
    async with daemon(path):
        await discord.push_message(CHANNEL, ALICE, "guild chatter, no mention", guild_id=GUILD)
        await discord.push_message(
            CHANNEL, BOB, f"<@{discord.bot_id}> guild question", guild_id=GUILD, mentions=[discord.bot_id]
        )
        in_guild = await wait_post(discord, "ops-model: guild question")
        await discord.push_message(DM, ALICE, "dm question, no mention")
        in_dm = await wait_post(discord, "ops-model: dm question, no mention")
    assert (in_guild["channel_id"], in_dm["channel_id"]) == (CHANNEL, DM)
    assert len(posts(discord)) == 2
    asked = [[m["content"] for m in r["messages"] if m["role"] == "user"][-1] for r in fake_llm.requests]
    assert asked == ["guild question", "dm question, no mention"]  # mention stripped; chatter never arrived


async def test_a_button_press_is_acknowledged_within_the_deadline_even_when_answering_is_slow(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord, autonomy="supervised"))
    async with daemon(path):
        request = await ask_for_approval(discord, fake_llm, "slow.txt")
        discord.interaction_deadline_s = 0.3  # Discord's is 3 s; the refusal post takes longer
        discord.slow_next("POST", "/channels/{id}/messages", 1.0)
        outsider = await click(discord, request, BOB, approve=True)
        await wait_post(discord, "Only the person who asked")
        approver = await click(discord, request, CAROL, approve=True)
        await wait_post(discord, "finished slow.txt")
    acks = {r["interaction_id"]: r["type"] for r in discord.interaction_responses}
    assert acks == {outsider: 6, approver: 6}  # neither press answered 10062


async def test_redelivered_message_after_restart_is_not_answered_twice(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord))
    fake_llm.default = echo_model
    async with daemon(path):
        message_id = await discord.push_message(DM, ALICE, "only once")
        await wait_post(discord, "ops-model: only once")
    async with daemon(path):
        await discord.push_message(DM, ALICE, "only once", message_id=message_id)  # the same message again
        await discord.push_message(DM, ALICE, "next")
        await wait_post(discord, "ops-model: next")
    assert [m["content"] for m in posts(discord)] == ["ops-model: only once", "ops-model: next"]
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["only once", "next"]
    assert [c.get("op") for c in discord.gateway_connections] == ["identify", "identify"]


