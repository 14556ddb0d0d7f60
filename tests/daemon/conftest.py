"""Daemon fixtures: each chat platform's fake, alone or as the kit the shared tests use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.daemon.chats import open_chat
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack


@pytest.fixture
async def chat(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """The platform named by the test's `chat` parameter (see BUTTON_CHATS, ALL_CHATS), running."""
    async with open_chat(request.param, monkeypatch) as kit:
        yield kit


@pytest.fixture
async def discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    async with open_chat("discord", monkeypatch) as kit:
        yield kit.fake


@pytest.fixture
async def slack(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSlack]:
    async with open_chat("slack", monkeypatch) as kit:
        yield kit.fake
