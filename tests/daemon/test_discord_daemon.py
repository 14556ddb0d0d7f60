"""The daemon with a real Discord adapter (discord.py) against the fake Discord and the fake LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.store import AuditLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_payloads import custom_ids
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

TOKEN = "fake-discord-daemon-token"
ALICE = "424242424242424242"  # asks
BOB = "777777777777777777"  # may talk to the bot, may not approve
CAROL = "888888888888888888"  # a route approver
DM = "500000000000000001"
CHANNEL = "600000000000000001"
GUILD = "700000000000000001"


def discord_toml(
    fake_llm: FakeOpenAI,
    discord: FakeDiscord,
    *,
    autonomy: str = "full",
    approval_timeout_s: float = 20,
    typing_after_s: float = 0.5,
) -> str:
    return (
        provider_toml(fake_llm.base_url)
        + f"""
[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "You are ops on Discord."
autonomy = "{autonomy}"
tools = ["file_write", "list_dir"]

[agents.ops.approval]
timeout_s = {approval_timeout_s}

[channels.guild_bot]
kind = "discord"
token = "env:DISCORD_TOKEN"
api_base_url = "{discord.api_base_url}"
guild_ready_timeout_s = 0.05
typing_after_s = {typing_after_s}

[[routes]]
channel = "guild_bot"
agent = "ops"
senders = ["{ALICE}", "{BOB}", "{CAROL}"]
approvers = ["{CAROL}"]
"""
    )




@pytest.fixture
async def discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    async with FakeDiscord(token=TOKEN) as fake:
        await fake.add_guild(GUILD, text_channels=[CHANNEL])
        yield fake


def posts(discord: FakeDiscord) -> list[dict[str, Any]]:
    """Return the plain messages the bot created (approval prompts, which carry buttons, excluded)."""
    return [m for m in discord.created_messages if not custom_ids(m)]


def prompts(discord: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in discord.created_messages if custom_ids(m)]


async def wait_post(discord: FakeDiscord, fragment: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for a plain message containing `fragment`; return the first such message."""
    await discord.wait_until(lambda: any(fragment in m["content"] for m in posts(discord)), timeout)
    return next(m for m in posts(discord) if fragment in m["content"])


async def ask_for_approval(discord: FakeDiscord, fake_llm: FakeOpenAI, file: str) -> str:
    """Have ALICE ask in the guild channel for a file_write; return the request id of the prompt."""
    seen = len(prompts(discord))
    fake_llm.script(tool_call("file_write", {"path": file, "content": "from discord"}), text(f"finished {file}"))
    await discord.push_message(
        CHANNEL, ALICE, f"<@{discord.bot_id}> please write {file}", guild_id=GUILD, mentions=[discord.bot_id]
    )
    await discord.wait_until(lambda: len(prompts(discord)) > seen)
    prompt = prompts(discord)[-1]
    assert prompt["channel_id"] == CHANNEL and "file_write" in prompt["content"]
    ids = custom_ids(prompt)
    (approve,) = [i for i in ids if i.endswith(":y")]
    request = approve.removeprefix("ap:").removesuffix(":y")
    assert sorted(ids) == sorted([f"ap:{request}:y", f"ap:{request}:n"])
    return request


async def click(discord: FakeDiscord, request: str, user: str, *, approve: bool) -> str:
    return await discord.click(f"ap:{request}:{'y' if approve else 'n'}", user, CHANNEL, guild_id=GUILD)


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


async def test_long_reply_is_chunked_with_code_fences_intact(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord))
    code = [f"value_{i:04d} = compute({i}, scale=2.5)  # step {i}" for i in range(110)]
    long_reply = "Here is the script:\n\n```python\n" + "\n".join(code) + "\n```\nThat is all."
    assert len(long_reply) > 2 * 2000
    fake_llm.script(text(long_reply))
    async with daemon(path):
        message_id = await discord.push_message(DM, ALICE, "give me the script")
        await wait_post(discord, "That is all.")
    chunks = [m["content"] for m in posts(discord)]
    assert len(chunks) >= 3
    assert all(len(c) <= 2000 for c in chunks)
    assert all(m["channel_id"] == DM for m in posts(discord))
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0, chunk[-80:]  # each chunk opens and closes its fences
    assert chunks[0].startswith("Here is the script:") and chunks[-1].endswith("That is all.")
    assert all(c.startswith("```python\n") for c in chunks[1:])  # continuations reopen the block
    shown = [line for c in chunks for line in c.split("\n") if line.startswith("value_")]
    assert shown == code  # nothing lost, nothing repeated, lines never split
    first, *rest = [m.get("message_reference") for m in posts(discord)]
    assert first is not None and str(first["message_id"]) == message_id  # only the first chunk replies
    assert rest == [None] * (len(chunks) - 1)


async def test_approval_buttons_outsider_refused_then_approver_approves(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(discord, fake_llm, "approved.txt")
        outsider = await click(discord, request, BOB, approve=True)  # BOB may talk to ops, not approve
        refusal = await wait_post(discord, "Only the person who asked")
        await discord.wait_until(lambda: any(r["interaction_id"] == outsider for r in discord.interaction_responses))
        assert refusal["channel_id"] == CHANNEL
        assert not (workspace / "approved.txt").exists()
        assert len(fake_llm.requests) == 1  # the turn is still waiting on the approval
        approver = await click(discord, request, CAROL, approve=True)
        await wait_post(discord, "finished approved.txt")
        assert (workspace / "approved.txt").read_text() == "from discord"
    assert posts(discord)[-1]["content"] == "finished approved.txt"
    # both presses were acknowledged to Discord as deferred updates (type 6)
    acks = {r["interaction_id"]: r["type"] for r in discord.interaction_responses}
    assert acks == {outsider: 6, approver: 6}
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["tool"], r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("file_write", "approved", f"guild_bot:{CAROL}")]


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


async def test_approval_deny_button_means_not_run(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord, autonomy="supervised"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(discord, fake_llm, "denied.txt")
        await click(discord, request, ALICE, approve=False)  # the requester may answer
        await wait_post(discord, "finished denied.txt")
        assert not (workspace / "denied.txt").exists()
    tool_result = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "denied" in tool_result.lower() and "from discord" not in tool_result
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("denied", f"guild_bot:{ALICE}")]


async def test_approval_timeout_means_not_run_and_the_chat_is_told(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    path = write_config(discord_toml(fake_llm, discord, autonomy="supervised", approval_timeout_s=1))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        request = await ask_for_approval(discord, fake_llm, "late.txt")
        note = await wait_post(discord, "in time: it was not run")
        await wait_post(discord, "finished late.txt")
        await click(discord, request, ALICE, approve=True)  # too late: nothing is pending
        await wait_post(discord, f"There is no pending approval {request}")
    assert note["channel_id"] == CHANNEL and request in note["content"]
    assert not (workspace / "late.txt").exists()
    assert len(fake_llm.requests) == 2  # the late click started nothing


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


async def test_approval_prompt_shows_every_argument_name_despite_a_long_first_one(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    arguments = {"content": "A" * 5000, "path": "hidden.txt"}
    path = write_config(discord_toml(fake_llm, discord, autonomy="supervised"))
    async with daemon(path):
        fake_llm.script(tool_call("file_write", arguments), text("finished hidden.txt"))
        await discord.push_message(
            CHANNEL, ALICE, f"<@{discord.bot_id}> please write", guild_id=GUILD, mentions=[discord.bot_id]
        )
        await discord.wait_until(lambda: bool(prompts(discord)))
        (prompt,) = prompts(discord)
        (deny,) = [i for i in custom_ids(prompt) if i.endswith(":n")]
        await click(discord, deny.removeprefix("ap:").removesuffix(":n"), ALICE, approve=False)
        await wait_post(discord, "finished hidden.txt")
    # the core handed the whole call over; the adapter fitted it to one message (2,000 characters)
    shown = prompt["content"].split("```\n")[1].split("\n```")[0]
    assert shown.startswith('{"path": "hidden.txt", "content": "AAA') and "chars cut]…" in shown
    assert len(shown) > 1500 and len(prompt["content"]) <= 2000
