"""The real `orchestrator run` killed with SIGKILL while replies stream into a Telegram group, a
Slack thread (a chat stream) and a Discord channel at once: the next start edits what the killed
process half-showed, so no partial text stays above the notice or the answer.

Two kills in one daemon config serving all three platforms:

1. while the model writes (rows `running`): the half-shown message becomes the restart notice;
2. while the final text is being put in place (rows `replying`: every edit fails until the
   kill): the half-shown message becomes the answer, with nothing posted below it.

Each platform's chat is asserted as a user would read it at the end: exactly the notice of the
first question and the answer to the second, in the messages the killed streams posted.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.daemon.chats import (
    DISCORD_ALICE,
    DISCORD_CHANNEL,
    DISCORD_GUILD,
    DISCORD_TOKEN,
    SLACK_ALICE,
    SLACK_CHANNEL,
    discord_mention,
    plain_posts,
    posts,
)
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply, paced, text
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import start, stderr_of

pytestmark = pytest.mark.slow

GROUP = -1007
TG_USER = 71
THREAD = "1700000000.000700"
NOTICE = re.compile(r'^I was restarted while answering "(.+)" and could not finish\.')
CHANNELS = ("tg", "work", "guild_bot")
SUFFIXES = {"telegram": "tg", "slack": "slack", "discord": "discord"}  # what each platform's questions end with


def _config(fake_llm: FakeOpenAI, tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord) -> str:
    routes = "".join(
        f'\n[[routes]]\nchannel = "{name}"\nagent = "a"\nsenders = ["*"]\nreply_in_groups = "all"\n' for name in CHANNELS
    )
    return provider_toml(fake_llm.base_url) + f"""
[daemon]
shutdown_grace_s = 20
reply_deadline_s = 600

[agents.a]
provider = "fake"
model = "m"

[channels.tg]
kind = "telegram"
token = "env:FAULT_TG_TOKEN"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1
format = "plain"
stream_edit_interval_s = 0.3

[channels.work]
kind = "slack"
bot_token = "env:SLACK_BOT"
app_token = "env:SLACK_APP"
api_base_url = "{slack.api_base_url}"
socket_ping_interval_s = 0.5
stream_edit_interval_s = 0.3

[channels.guild_bot]
kind = "discord"
token = "env:DISCORD_TOKEN"
api_base_url = "{discord.api_base_url}"
guild_ready_timeout_s = 0.05
stream_edit_interval_s = 0.3
{routes}"""


def answer_to(question: str) -> str:
    """The whole answer the model streams to `question` (distinct per question, several edits long)."""
    return f"About {question}: " + " ".join(f"w{i}" for i in range(30)) + "."


def _rows(state_dir: Path) -> list[tuple[str, str, list[str]]]:
    """Return (channel, state, streamed message ids) of every inbox row, read as another process."""
    db = sqlite3.connect(f"file:{state_dir / 'sessions.sqlite3'}?mode=ro", uri=True, timeout=5)
    try:
        found = db.execute("SELECT channel, state, stream FROM inbox ORDER BY received").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        db.close()
    return [(c, s, json.loads(ids) if ids else []) for c, s, ids in found]


async def _wait_rows(proc: asyncio.subprocess.Process, state_dir: Path, state: str, count: int) -> None:
    """Wait until `count` rows are in `state` with a streamed message on record (the daemon alive)."""
    async with asyncio.timeout(60):
        while sum(1 for _, s, ids in _rows(state_dir) if s == state and ids) < count:
            assert proc.returncode is None, stderr_of(proc)[-3000:]
            await asyncio.sleep(0.05)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


def _chats(tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord) -> dict[str, list[str]]:
    """Return each platform's bot messages as a user reads them now, oldest first."""
    return {
        "telegram": tg.shown(GROUP),
        "slack": [m["text"] for m in plain_posts(slack) if m.get("thread_ts") == THREAD],
        "discord": [m["content"] for m in posts(discord)],
    }


def _posted(tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord) -> dict[str, int]:
    """Return how many messages the bot ever created on each platform (edits not counted)."""
    return {
        "telegram": sum(1 for v in tg.visible if v.chat_id == GROUP and v.kind == "send"),
        "slack": len(slack.calls("chat.startStream")) + len(slack.calls("chat.postMessage")),
        "discord": len(discord.created_messages),
    }


def _tally(chat: list[str], asked: list[str]) -> dict[str, int]:
    """Count one chat's outcome for the fault table."""
    answers = [t for t in chat if any(t == answer_to(q) for q in asked)]
    notices = [t for t in chat if NOTICE.match(t)]
    return {
        "messages": len(asked),
        "answered": len(set(answers)),
        "duplicates": len(answers) - len(set(answers)) + len(notices) - len(set(notices)),
        "lost": sum(1 for q in asked if answer_to(q) not in chat and not any(q in n for n in notices)),
        "notices": len(notices),
        "half_shown_left": len(chat) - len(answers) - len(notices),
    }


async def _ask_everywhere(tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord, question: str) -> None:
    tg.push_message(GROUP, TG_USER, f"{question} tg", chat_type="group")
    await slack.push_mention(f"{question} slack", user=SLACK_ALICE, channel=SLACK_CHANNEL, thread_ts=THREAD)
    await discord_mention(discord, f"{question} discord")


def _fail_every_edit(tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord) -> None:
    """Make every call that could put a final text in place fail with an error a retry may fix."""
    tg.fail_next("editMessageText", status=502, description="Bad Gateway", times=100_000)
    for method in ("chat.appendStream", "chat.stopStream", "chat.update", "chat.postMessage"):
        slack.fail_next(method, status=500, times=100_000)
    discord.fail_next("PATCH", "/channels/{id}/messages/{id}", status=503, times=100_000)


def _heal(tg: FakeTelegram, slack: FakeSlack, discord: FakeDiscord) -> None:
    tg.heal("editMessageText")
    for method in ("chat.appendStream", "chat.stopStream", "chat.update", "chat.postMessage"):
        slack.heal(method)
    discord.heal()


@pytest.mark.timeout(240)
async def test_a_kill_mid_stream_leaves_no_half_shown_message_on_any_platform(
    write_config: WriteConfig, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing_s = {"over": 120.0}  # the first answers never finish: the kill comes mid-stream

    def model(request: dict[str, Any]) -> Reply:
        last = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        question = re.sub(r"^<@\w+>\s*", "", str(last)).strip()
        return paced(text(answer_to(question)), over_s=writing_s["over"])

    fake_llm.default = model
    monkeypatch.setenv("DISCORD_TOKEN", DISCORD_TOKEN)
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeDiscord(token=DISCORD_TOKEN) as discord:
        monkeypatch.setenv("SLACK_BOT", slack.bot_token)
        monkeypatch.setenv("SLACK_APP", slack.app_token)
        await discord.add_guild(DISCORD_GUILD, text_channels=[DISCORD_CHANNEL])
        path = write_config(_config(fake_llm, tg, slack, discord))
        state_dir = path.parent / "state"

        # 1. Killed while the model writes: three rows `running`, each with its half-shown message.
        proc = await start(path)
        await _ask_everywhere(tg, slack, discord, "first")
        await _wait_rows(proc, state_dir, "running", 3)
        await _kill(proc)
        half_shown = _chats(tg, slack, discord)
        assert all(len(texts) == 1 and texts[0].startswith("About first") for texts in half_shown.values()), half_shown

        # 2. The next start turns them into the notice; then a reply is killed while its final
        # text goes in place (every edit fails, so the rows stay `replying`).
        proc = await start(path)
        await tg.wait_for(
            lambda: all(len(t) == 1 and NOTICE.match(t[0]) for t in _chats(tg, slack, discord).values()), timeout=60
        )
        writing_s["over"] = 4.0
        _fail_every_edit(tg, slack, discord)  # each stream's first message posts; nothing after it lands
        await _ask_everywhere(tg, slack, discord, "second")
        await _wait_rows(proc, state_dir, "replying", 3)
        await _kill(proc)
        chats = _chats(tg, slack, discord)
        assert not any(answer_to(f"second {s}") in chats[p] for p, s in SUFFIXES.items()), chats  # not in place yet

        # 3. The last start puts each answer in place of its half-shown message.
        _heal(tg, slack, discord)
        proc = await start(path)
        try:
            expected = {p: [f"first {s}", answer_to(f"second {s}")] for p, s in SUFFIXES.items()}

            def settled() -> bool:
                chats = _chats(tg, slack, discord)
                return all(chats[p][-1:] == expected[p][-1:] for p in expected) and not any(
                    s in ("pending", "running", "replying") for _, s, _ in _rows(state_dir)
                )

            await tg.wait_for(settled, timeout=60)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    chats = _chats(tg, slack, discord)
    for platform, (first, answer) in expected.items():
        notice, final = chats[platform]  # two messages, nothing half-shown above or between them
        match = NOTICE.match(notice)
        assert match is not None and first in match[1], (platform, notice)
        assert final == answer, (platform, final)
        suffix = SUFFIXES[platform]
        print(f"kill mid-stream, {platform}: {_tally(chats[platform], [f'first {suffix}', f'second {suffix}'])}")
    assert _posted(tg, slack, discord) == {"telegram": 2, "slack": 2, "discord": 2}  # each one the killed stream's
    assert len(fake_llm.requests) == 6  # no question was asked of the model twice
