"""A reload (SIGHUP's `reload_config`) that restarts a channel while a reply streams into it.

The old adapter stops receiving at once but stays open until the reply streaming through it
ended, so the partial message becomes the answer (Slack: the chat stream is stopped with the
final text). Discord's old adapter loses its connection with its gateway, so it cannot end the
stream: the new adapter takes the partial message over, as after a crash, and edits it into
the answer. Telegram's group and private
chats are in test_streamed_replies.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.daemon import Runtime, reload_config
from tests.conftest import WriteConfig
from tests.daemon.chats import (
    SLACK_ALICE,
    SLACK_CHANNEL,
    discord_mention,
    discord_toml,
    plain_posts,
    posts,
    slack_toml,
)
from tests.daemon.platforms import daemon
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, paced, text
from tests.fakes.slack_api import FakeSlack

pytestmark = pytest.mark.slow

ANSWER = " ".join(f"word{i}" for i in range(40)) + "."
THREAD = "1700000000.000100"


async def _reload(path: Path, runtime: Runtime, toml: str, name: str, change: tuple[str, str]) -> None:
    """Rewrite the config with one setting of channel `name` changed (a restart) and reload."""
    old = runtime.channels.adapter(name)
    assert change[0] in toml
    path.write_text(toml.replace(*change))
    assert await reload_config(runtime, path)
    assert runtime.channels.adapter(name) is not old  # the channel was restarted


async def test_a_reload_mid_stream_in_a_slack_thread_stops_the_stream_with_the_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    toml = slack_toml(fake_llm, slack)
    path = write_config(toml)
    fake_llm.script(paced(text(ANSWER), over_s=3.0))
    async with daemon(path) as runtime:
        await slack.push_mention("write slowly", user=SLACK_ALICE, channel=SLACK_CHANNEL, thread_ts=THREAD)
        await slack.wait_until(lambda: bool(slack.calls("chat.appendStream")), "an append", timeout=20)
        await _reload(path, runtime, toml, "work", ("socket_ping_interval_s = 0.5", "socket_ping_interval_s = 0.6"))
        await slack.wait_until(lambda: bool(slack.calls("chat.stopStream")), "the stop", timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    [reply] = plain_posts(slack)  # the streamed message itself became the answer
    assert reply["text"] == ANSWER and reply["thread_ts"] == THREAD
    assert len(slack.calls("chat.startStream")) == 1 and slack.calls("chat.postMessage") == []


async def test_a_reload_mid_stream_on_discord_edits_the_partial_message_into_the_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    toml = discord_toml(fake_llm, discord)
    path = write_config(toml)
    fake_llm.script(paced(text(ANSWER), over_s=3.0))
    async with daemon(path) as runtime:
        await discord_mention(discord, "write slowly")
        await discord.wait_until(lambda: bool(posts(discord)), timeout=20)
        await _reload(path, runtime, toml, "guild_bot", ("guild_ready_timeout_s = 0.05", "guild_ready_timeout_s = 0.06"))
        await discord.wait_until(lambda: any(m["content"] == ANSWER for m in posts(discord)), timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    [reply] = posts(discord)  # the new adapter edited the partial message into the answer
    assert reply["content"] == ANSWER
    assert len(discord.created_messages) == 1  # nothing posted below it
