"""The real `orchestrator run` with a Discord channel: its start log has nothing about voice."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import WriteConfig
from tests.daemon.chats import discord_toml
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.faults.kit import start, stderr_of

pytestmark = pytest.mark.slow


@pytest.mark.timeout(90)
async def test_a_text_bot_logs_no_voice_library_warnings_at_start(
    write_config: WriteConfig, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # discord.py warns once per process, so only a fresh process shows it: the real daemon
    async with FakeDiscord() as dc:
        monkeypatch.setenv("DISCORD_TOKEN", dc.token)
        proc = await start(write_config(discord_toml(fake_llm, dc)))  # waits for `ready:`
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0
    log = stderr_of(proc)
    assert "ready: channels guild_bot" in log
    assert "voice" not in log.lower(), log
