"""Chat platforms seen from a daemon test: each fake with its people, config and the moves a test makes.

`open_chat(name, monkeypatch)` opens the platform's fake and returns a `Chat`; the tests in
test_chat_platforms.py run once per platform through it, where the behaviour is the same. The
module-level helpers (`posts`, `texts`, `wait_post`, ...) serve the platform-specific tests too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

import pytest

from channels import parse_approval_button
from tests.conftest import provider_toml
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_payloads import custom_ids
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.fakes.telegram_api import FakeTelegram

BUTTON_CHATS: Final = ("discord", "slack")  # approvals by button press with a route approver
ALL_CHATS: Final = ("discord", "slack", "telegram")  # each kit is a `GroupChat` too


class Chat(Protocol):
    """One platform under the daemon, as the tests every platform shares use it: ALICE asks."""

    fake: Any
    channel: str  # the config's channel name (audit rows say `<channel>:<user>`)
    alice: str
    dm: str  # ALICE's direct chat with the bot
    asks_in: str  # where `ask` and `ask_for_approval` post

    def toml(self, fake_llm: FakeOpenAI, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str: ...
    async def push_dm(self, message: str) -> str: ...
    async def ask(self, message: str) -> None: ...
    async def click(self, request: str, user: str, *, approve: bool) -> str: ...
    async def wait_text(self, fragment: str) -> dict[str, Any]: ...
    async def wait_prompt(self) -> dict[str, Any]: ...
    def posts(self) -> list[dict[str, Any]]: ...
    def texts(self) -> list[str]: ...
    def chat_of(self, post: dict[str, Any]) -> str: ...
    def text_of(self, post: dict[str, Any]) -> str: ...
    def request_of(self, prompt: dict[str, Any]) -> str: ...
    def prompt_text(self, prompt: dict[str, Any]) -> str: ...
    def arguments_in(self, prompt: dict[str, Any]) -> str: ...

    prompt_room: int  # the most an approval prompt may take on this platform


class GroupChat(Chat, Protocol):
    """A platform's group (a Telegram supergroup, a Slack channel, a Discord guild channel) with ALICE and BOB.

    Every move is ALICE's unless `user` says otherwise; `settle` waits until every message sent so
    far was handed to the daemon (so a count of model calls after it is final).
    """

    group: str

    def group_toml(self, fake_llm: FakeOpenAI, *, route_extra: str = "") -> str: ...
    async def say(self, message: str, *, user: str | None = None) -> None: ...
    async def mention_bot(self, message: str) -> None: ...
    async def mention_other(self, message: str) -> None: ...
    async def reply_to_bot(self, message: str) -> None: ...
    async def command(self, command: str, *, to_other_bot: bool = False) -> None: ...
    async def settle(self) -> None: ...


class ButtonChat(Chat, Protocol):
    """A platform whose route has an approver: BOB may talk to the bot but not approve, CAROL approves."""

    bob: str
    carol: str
    limit: int  # the platform's longest message
    marker: str  # the content ALICE's file_write writes

    async def ask_for_approval(self, fake_llm: FakeOpenAI, file: str) -> str: ...
    async def assert_acknowledged(self, *presses: str) -> None: ...
    def assert_only_first_chunk_replies(self, message: str) -> None: ...


def ops_toml(fake_llm: FakeOpenAI, channel: str, *, system_prompt: str, autonomy: str, approval_timeout_s: float,
             senders: list[str], approvers: list[str], route_extra: str = "") -> str:
    """Return the `ops` agent (file_write, list_dir) routed from `channel` (its table appended by the caller;
    `route_extra`: more keys of the route, such as `reply_in_groups`)."""
    approver_line = f"approvers = {json.dumps(approvers)}\n" if approvers else ""
    return (
        provider_toml(fake_llm.base_url)
        + f"""
[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "{system_prompt}"
autonomy = "{autonomy}"
tools = ["file_write", "list_dir"]

[agents.ops.approval]
timeout_s = {approval_timeout_s}

[[routes]]
channel = "{channel}"
agent = "ops"
senders = {json.dumps(senders)}
{approver_line}{route_extra}
"""
    )


def channel_table(toml: str, channel: str) -> str:
    """Return the `[channels.<channel>]` table at the end of `toml` (a kit's config), to follow another route."""
    return toml[toml.index(f"\n[channels.{channel}]"):]


# ------------------------------------------------------------------------------------ Discord

DISCORD_TOKEN: Final = "fake-discord-daemon-token"
DISCORD_ALICE: Final = "424242424242424242"
DISCORD_BOB: Final = "777777777777777777"
DISCORD_CAROL: Final = "888888888888888888"
DISCORD_DM: Final = "500000000000000001"
DISCORD_CHANNEL: Final = "600000000000000001"
DISCORD_GUILD: Final = "700000000000000001"
DISCORD_OTHER_BOT: Final = "999999999999999999"


def discord_toml(
    fake_llm: FakeOpenAI,
    discord: FakeDiscord,
    *,
    autonomy: str = "full",
    approval_timeout_s: float = 20,
    typing_after_s: float = 0.5,
) -> str:
    return ops_toml(
        fake_llm, "guild_bot", system_prompt="You are ops on Discord.", autonomy=autonomy,
        approval_timeout_s=approval_timeout_s, senders=[DISCORD_ALICE, DISCORD_BOB, DISCORD_CAROL],
        approvers=[DISCORD_CAROL],
    ) + f"""
[channels.guild_bot]
kind = "discord"
token = "env:DISCORD_TOKEN"
api_base_url = "{discord.api_base_url}"
guild_ready_timeout_s = 0.05
typing_after_s = {typing_after_s}
"""


def posts(discord: FakeDiscord) -> list[dict[str, Any]]:
    """Return the plain messages the bot created as a user sees them now (a streamed reply's
    edits applied, deleted ones gone; approval prompts, which carry buttons, excluded)."""
    shown = discord.messages.contents
    return [m | {"content": shown[m["id"]]} for m in discord.created_messages if not custom_ids(m) and m["id"] in shown]


def discord_prompts(discord: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in discord.created_messages if custom_ids(m)]


async def wait_post(discord: FakeDiscord, fragment: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for a plain message containing `fragment`; return the first such message."""
    await discord.wait_until(lambda: any(fragment in m["content"] for m in posts(discord)), timeout)
    return next(m for m in posts(discord) if fragment in m["content"])


async def discord_mention(discord: FakeDiscord, message: str) -> str:
    """Have ALICE say `message` to the bot in the guild channel, mentioning it."""
    return await discord.push_message(
        DISCORD_CHANNEL, DISCORD_ALICE, f"<@{discord.bot_id}> {message}", guild_id=DISCORD_GUILD,
        mentions=[discord.bot_id],
    )


async def discord_ask_for_approval(discord: FakeDiscord, fake_llm: FakeOpenAI, file: str) -> str:
    """Have ALICE ask in the guild channel for a file_write; return the request id of the prompt."""
    seen = len(discord_prompts(discord))
    fake_llm.script(tool_call("file_write", {"path": file, "content": "from discord"}), text(f"finished {file}"))
    await discord_mention(discord, f"please write {file}")
    await discord.wait_until(lambda: len(discord_prompts(discord)) > seen)
    prompt = discord_prompts(discord)[-1]
    assert prompt["channel_id"] == DISCORD_CHANNEL and "file_write" in prompt["content"]
    ids = custom_ids(prompt)
    request = discord_request_of(prompt)
    assert sorted(ids) == sorted([f"ap:{request}:y", f"ap:{request}:n"])
    return request


def discord_request_of(prompt: dict[str, Any]) -> str:
    (approve,) = [i for i in custom_ids(prompt) if i.endswith(":y")]
    return approve.removeprefix("ap:").removesuffix(":y")


async def discord_click(discord: FakeDiscord, request: str, user: str, *, approve: bool) -> str:
    return await discord.click(
        f"ap:{request}:{'y' if approve else 'n'}", user, DISCORD_CHANNEL, guild_id=DISCORD_GUILD
    )


class DiscordChat:
    """discord.py's gateway and REST against FakeDiscord; approvals are asked in a guild channel."""

    channel = "guild_bot"
    alice, bob, carol = DISCORD_ALICE, DISCORD_BOB, DISCORD_CAROL
    dm, asks_in = DISCORD_DM, DISCORD_CHANNEL
    limit = 2000
    marker = "from discord"

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake

    def toml(self, fake_llm: FakeOpenAI, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str:
        return discord_toml(fake_llm, self.fake, autonomy=autonomy, approval_timeout_s=approval_timeout_s)

    async def push_dm(self, message: str) -> str:
        return await self.fake.push_message(DISCORD_DM, DISCORD_ALICE, message)

    async def ask(self, message: str) -> None:
        await discord_mention(self.fake, message)

    async def ask_for_approval(self, fake_llm: FakeOpenAI, file: str) -> str:
        return await discord_ask_for_approval(self.fake, fake_llm, file)

    group = DISCORD_CHANNEL

    def group_toml(self, fake_llm: FakeOpenAI, *, route_extra: str = "") -> str:
        return ops_toml(
            fake_llm, "guild_bot", system_prompt="ops", autonomy="full", approval_timeout_s=20,
            senders=[DISCORD_ALICE, DISCORD_BOB], approvers=[], route_extra=route_extra,
        ) + channel_table(discord_toml(fake_llm, self.fake), "guild_bot")

    async def say(self, message: str, *, user: str | None = None) -> None:
        await self.fake.push_message(DISCORD_CHANNEL, user or DISCORD_ALICE, message, guild_id=DISCORD_GUILD)

    async def mention_bot(self, message: str) -> None:
        await discord_mention(self.fake, message)

    async def mention_other(self, message: str) -> None:
        await self.fake.push_message(
            DISCORD_CHANNEL, DISCORD_BOB, f"<@{DISCORD_ALICE}> {message}", guild_id=DISCORD_GUILD, mentions=[DISCORD_ALICE]
        )

    async def reply_to_bot(self, message: str) -> None:
        said = [m for m in self.fake.created_messages if m["channel_id"] == DISCORD_CHANNEL][-1]
        await self.fake.push_message(DISCORD_CHANNEL, DISCORD_ALICE, message, guild_id=DISCORD_GUILD, reply_to=said["id"])

    async def command(self, command: str, *, to_other_bot: bool = False) -> None:
        # Discord has no `/cmd@bot`: a command to another bot mentions that bot
        text = f"<@{DISCORD_OTHER_BOT}> {command}" if to_other_bot else command
        mentions = [DISCORD_OTHER_BOT] if to_other_bot else []
        await self.fake.push_message(DISCORD_CHANNEL, DISCORD_ALICE, text, guild_id=DISCORD_GUILD, mentions=mentions)

    async def settle(self) -> None:
        pass  # discord.py hands messages over one at a time, in order: a later answer settles them

    async def click(self, request: str, user: str, *, approve: bool) -> str:
        return await discord_click(self.fake, request, user, approve=approve)

    async def assert_acknowledged(self, *presses: str) -> None:
        """Every press so far got exactly one deferred-update answer (type 6), never 10062."""
        responses = self.fake.interaction_responses
        await self.fake.wait_until(lambda: {r["interaction_id"] for r in responses} >= set(presses))
        assert {r["interaction_id"]: r["type"] for r in responses} == {p: 6 for p in presses}

    async def wait_text(self, fragment: str) -> dict[str, Any]:
        return await wait_post(self.fake, fragment)

    async def wait_prompt(self) -> dict[str, Any]:
        await self.fake.wait_until(lambda: bool(discord_prompts(self.fake)))
        (prompt,) = discord_prompts(self.fake)
        return prompt

    def posts(self) -> list[dict[str, Any]]:
        return posts(self.fake)

    def texts(self) -> list[str]:
        return [m["content"] for m in posts(self.fake)]

    def chat_of(self, post: dict[str, Any]) -> str:
        return str(post["channel_id"])

    def text_of(self, post: dict[str, Any]) -> str:
        return str(post["content"])

    def request_of(self, prompt: dict[str, Any]) -> str:
        return discord_request_of(prompt)

    def prompt_text(self, prompt: dict[str, Any]) -> str:
        return str(prompt["content"])

    prompt_room = 2000  # one message's content

    def arguments_in(self, prompt: dict[str, Any]) -> str:
        return self.prompt_text(prompt).split("```\n")[1].split("\n```")[0]

    def assert_only_first_chunk_replies(self, message: str) -> None:
        first, *rest = [m.get("message_reference") for m in posts(self.fake)]
        assert first is not None and str(first["message_id"]) == message
        assert rest == [None] * len(rest)


# -------------------------------------------------------------------------------------- Slack

SLACK_ALICE: Final = "U0ALICE"
SLACK_BOB: Final = "U0BOB"
SLACK_CAROL: Final = "U0CAROL"
SLACK_DM: Final = "D0ALICE"
SLACK_CHANNEL: Final = "C0OPS"
SLACK_OTHER_BOT: Final = "U0OTHERBOT"


def slack_toml(fake_llm: FakeOpenAI, slack: FakeSlack, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str:
    return ops_toml(
        fake_llm, "work", system_prompt="You are ops on Slack.", autonomy=autonomy,
        approval_timeout_s=approval_timeout_s, senders=[SLACK_ALICE, SLACK_BOB, SLACK_CAROL],
        approvers=[SLACK_CAROL],
    ) + f"""
[channels.work]
kind = "slack"
bot_token = "env:SLACK_BOT"
app_token = "env:SLACK_APP"
api_base_url = "{slack.api_base_url}"
socket_ping_interval_s = 0.5
"""


def plain_posts(slack: FakeSlack) -> list[dict[str, Any]]:
    """Return the bot's plain messages as a user sees them now, oldest first: posted ones and
    chat streams, a streamed reply's edits and appends applied, deleted ones gone (approval
    prompts, which carry blocks, excluded)."""
    payloads = {m["ts"]: m for m in slack.posted}
    shown: list[dict[str, Any]] = []
    for message in slack.messages.messages.values():
        payload = payloads.get(message.ts)
        if message.deleted or (payload is not None and payload.get("blocks")):
            continue
        if payload is None:  # a chat stream: always in a thread
            payload = {"channel": message.channel, "ts": message.ts, "thread_ts": message.thread_ts}
        shown.append(payload | {"text": message.visible})
    return shown


def texts(slack: FakeSlack) -> list[str]:
    """Return the text of every plain message the bot posted, as shown now (approval prompts excluded)."""
    return [m["text"] for m in plain_posts(slack)]


def slack_prompts(slack: FakeSlack) -> list[dict[str, Any]]:
    return [m for m in slack.posted if m.get("blocks")]


def request_id(prompt: dict[str, Any]) -> str:
    """Return the approval request id the prompt's Approve button carries."""
    actions = next(b for b in prompt["blocks"] if b["type"] == "actions")
    answers = [parse_approval_button(e["value"]) for e in actions["elements"]]
    return next(answer[0] for answer in answers if answer is not None and answer[1])


async def wait_posts(slack: FakeSlack, predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Wait until `predicate()` holds, re-checking after every Web API call (posts and edits)."""
    await slack.wait_until(predicate, "the expected posts", timeout=timeout)


async def wait_text(slack: FakeSlack, fragment: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for a plain post containing `fragment`; return the first such post."""
    await wait_posts(slack, lambda: any(fragment in t for t in texts(slack)), timeout=timeout)
    return next(m for m in plain_posts(slack) if fragment in m["text"])


async def slack_ask_for_approval(slack: FakeSlack, fake_llm: FakeOpenAI, file: str) -> str:
    """Have ALICE ask in the DM for a file_write; return the request id of the prompt that follows."""
    seen = len(slack_prompts(slack))
    fake_llm.script(tool_call("file_write", {"path": file, "content": "from slack"}), text(f"finished {file}"))
    await slack.push_message(f"please write {file}", user=SLACK_ALICE, channel=SLACK_DM)
    await wait_posts(slack, lambda: len(slack_prompts(slack)) > seen)
    prompt = slack_prompts(slack)[-1]
    assert prompt["channel"] == SLACK_DM and "file_write" in prompt["text"]
    labels = [e["text"]["text"] for b in prompt["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert labels == ["Approve", "Deny"]
    return request_id(prompt)


class SlackChat:
    """slack-bolt in Socket Mode against FakeSlack; approvals are asked in ALICE's DM."""

    channel = "work"
    alice, bob, carol = SLACK_ALICE, SLACK_BOB, SLACK_CAROL
    dm = asks_in = SLACK_DM
    limit = 4000
    marker = "from slack"

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake

    def toml(self, fake_llm: FakeOpenAI, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str:
        return slack_toml(fake_llm, self.fake, autonomy=autonomy, approval_timeout_s=approval_timeout_s)

    async def push_dm(self, message: str) -> str:
        return await self.fake.push_message(message, user=SLACK_ALICE, channel=SLACK_DM)

    async def ask(self, message: str) -> None:
        await self.push_dm(message)

    async def ask_for_approval(self, fake_llm: FakeOpenAI, file: str) -> str:
        return await slack_ask_for_approval(self.fake, fake_llm, file)

    group = SLACK_CHANNEL
    _envelopes: list[str]

    def group_toml(self, fake_llm: FakeOpenAI, *, route_extra: str = "") -> str:
        return ops_toml(
            fake_llm, "work", system_prompt="ops", autonomy="full", approval_timeout_s=20,
            senders=[SLACK_ALICE, SLACK_BOB], approvers=[], route_extra=route_extra,
        ) + channel_table(slack_toml(fake_llm, self.fake), "work")

    async def _post(self, text: str, *, user: str = SLACK_ALICE, **fields: Any) -> None:
        envelope = await self.fake.push_channel_message(text, user=user, channel=SLACK_CHANNEL, **fields)
        self._envelopes = [*getattr(self, "_envelopes", []), envelope]

    async def say(self, message: str, *, user: str | None = None) -> None:
        await self._post(message, user=user or SLACK_ALICE)

    async def mention_bot(self, message: str) -> None:
        await self._post(f"<@{BOT_USER_ID}> {message}")

    async def mention_other(self, message: str) -> None:
        await self._post(f"<@{SLACK_ALICE}> {message}", user=SLACK_BOB)

    async def reply_to_bot(self, message: str) -> None:
        said = [m for m in plain_posts(self.fake) if m["channel"] == SLACK_CHANNEL][-1]
        await self._post(message, thread_ts=said["ts"], parent_user_id=BOT_USER_ID)

    async def command(self, command: str, *, to_other_bot: bool = False) -> None:
        # Slack's composer takes a leading `/` as a slash command: people type ` /cmd` (its space cut)
        await self._post(f"<@{SLACK_OTHER_BOT}> {command}" if to_other_bot else f" {command}")

    async def settle(self) -> None:
        for envelope in getattr(self, "_envelopes", []):
            await self.fake.wait_acked(envelope)  # acknowledged only after the daemon took or dropped it

    async def click(self, request: str, user: str, *, approve: bool) -> str:
        return await self.fake.click(request, user=user, approve=approve)

    async def assert_acknowledged(self, *presses: str) -> None:
        """Every press was acked on the Socket Mode connection."""
        for press in presses:
            await self.fake.wait_acked(press)

    async def wait_text(self, fragment: str) -> dict[str, Any]:
        return await wait_text(self.fake, fragment)

    async def wait_prompt(self) -> dict[str, Any]:
        await wait_posts(self.fake, lambda: bool(slack_prompts(self.fake)))
        (prompt,) = slack_prompts(self.fake)
        return prompt

    def posts(self) -> list[dict[str, Any]]:
        return plain_posts(self.fake)

    def texts(self) -> list[str]:
        return texts(self.fake)

    def chat_of(self, post: dict[str, Any]) -> str:
        return str(post["channel"])

    def text_of(self, post: dict[str, Any]) -> str:
        return str(post["text"])

    def request_of(self, prompt: dict[str, Any]) -> str:
        return request_id(prompt)

    def prompt_text(self, prompt: dict[str, Any]) -> str:
        return str(prompt["blocks"][0]["text"]["text"])

    prompt_room = 3000  # one section block's text

    def arguments_in(self, prompt: dict[str, Any]) -> str:
        return self.prompt_text(prompt).split("```")[1]

    def assert_only_first_chunk_replies(self, message: str) -> None:
        # a DM answer is never threaded, so no chunk points back at the question
        assert all("thread_ts" not in m for m in self.posts())


# ----------------------------------------------------------------------------------- Telegram

TELEGRAM_TOKEN: Final = "111111:AAA-ops-bot"
TELEGRAM_GROUP: Final = -1001500


class TelegramChat:
    """python-telegram-bot polling FakeTelegram; one bot, ALICE asks in her private chat.

    Only a `Chat`: this route has no approver (the requester answers), and the fake presses the
    latest prompt's button by its label.
    """

    channel = "ops_bot"
    alice = dm = asks_in = "10"

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake

    def toml(self, fake_llm: FakeOpenAI, *, autonomy: str = "full", approval_timeout_s: float = 20) -> str:
        return ops_toml(
            fake_llm, "ops_bot", system_prompt="ops", autonomy=autonomy, approval_timeout_s=approval_timeout_s,
            senders=["10", "11"], approvers=[],
        ) + f"""
[channels.ops_bot]
kind = "telegram"
token = "env:TG_OPS"
api_base_url = "{self.fake.api_base_url}"
poll_timeout_s = 1
"""

    def _prompts(self) -> list[dict[str, Any]]:
        return [p for p in self.fake.calls("sendMessage") if "reply_markup" in p]

    group = str(TELEGRAM_GROUP)

    def group_toml(self, fake_llm: FakeOpenAI, *, route_extra: str = "") -> str:
        return ops_toml(
            fake_llm, "ops_bot", system_prompt="ops", autonomy="full", approval_timeout_s=20,
            senders=["10", "11"], approvers=[], route_extra=route_extra,
        ) + channel_table(self.toml(fake_llm), "ops_bot")

    def _group(self, user: int, text: str, **fields: Any) -> None:
        self.fake.push_message(TELEGRAM_GROUP, user, text, chat_type="supergroup", **fields)

    async def say(self, message: str, *, user: str | None = None) -> None:
        self._group(int(user or "10"), message)

    async def mention_bot(self, message: str) -> None:
        self._group(10, f"@ops_bot {message}")

    async def mention_other(self, message: str) -> None:
        self._group(11, f"@alice_human {message}")

    async def reply_to_bot(self, message: str) -> None:
        said = [p for p in self.fake.sent_messages(TELEGRAM_GROUP) if p["from"]["is_bot"]][-1]
        self._group(10, message, reply_to=said["message_id"])

    async def command(self, command: str, *, to_other_bot: bool = False) -> None:
        self._group(10, f"{command}@{'other_bot' if to_other_bot else 'ops_bot'}")

    async def settle(self) -> None:
        await self.fake.wait_for(lambda: not self.fake.pending(), timeout=10)  # confirmed = handed over

    async def push_dm(self, message: str) -> str:
        return str(self.fake.push_message(10, 10, message)["update_id"])

    async def ask(self, message: str) -> None:
        await self.push_dm(message)

    async def click(self, request: str, user: str, *, approve: bool) -> str:
        update = self.fake.press_button(int(user), "Approve" if approve else "Deny")
        return str(update["update_id"])

    async def wait_text(self, fragment: str) -> dict[str, Any]:
        await self.fake.wait_for(lambda: any(fragment in p["text"] for p in self.posts()), timeout=10)
        return next(p for p in self.posts() if fragment in p["text"])

    async def wait_prompt(self) -> dict[str, Any]:
        await self.fake.wait_for(lambda: bool(self._prompts()), timeout=10)
        (prompt,) = self._prompts()
        return prompt

    def posts(self) -> list[dict[str, Any]]:
        return [p for p in self.fake.calls("sendMessage") if "reply_markup" not in p]

    def texts(self) -> list[str]:
        return [p["text"] for p in self.posts()]

    def chat_of(self, post: dict[str, Any]) -> str:
        return str(post["chat_id"])

    def text_of(self, post: dict[str, Any]) -> str:
        return str(post["text"])

    def request_of(self, prompt: dict[str, Any]) -> str:
        data = prompt["reply_markup"]
        if isinstance(data, str):
            data = json.loads(data)
        (approve,) = [b["callback_data"] for row in data["inline_keyboard"] for b in row if b["text"] == "Approve"]
        return str(approve).removeprefix("ap:").removesuffix(":y")

    def prompt_text(self, prompt: dict[str, Any]) -> str:
        return str(prompt["text"])

    prompt_room = 4096  # one message (UTF-16 units; the prompt here is ASCII)

    def arguments_in(self, prompt: dict[str, Any]) -> str:
        return self.prompt_text(prompt).split("Arguments: ")[1].split("\nRequested by")[0]


@asynccontextmanager
async def open_chat(platform: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """Start the platform's fake with the environment its channel's secrets name; yield its kit.

    Discord and Slack yield a `ButtonChat`, Telegram a `Chat`.
    """
    if platform == "discord":
        monkeypatch.setenv("DISCORD_TOKEN", DISCORD_TOKEN)
        async with FakeDiscord(token=DISCORD_TOKEN) as discord:
            await discord.add_guild(DISCORD_GUILD, text_channels=[DISCORD_CHANNEL])
            yield DiscordChat(discord)
    elif platform == "slack":
        async with FakeSlack() as slack:
            monkeypatch.setenv("SLACK_BOT", slack.bot_token)
            monkeypatch.setenv("SLACK_APP", slack.app_token)
            yield SlackChat(slack)
    elif platform == "telegram":
        monkeypatch.setenv("TG_OPS", TELEGRAM_TOKEN)
        async with FakeTelegram(token=TELEGRAM_TOKEN, username="ops_bot") as tg:
            yield TelegramChat(tg)
    else:
        raise ValueError(f"no chat kit for {platform!r}")
