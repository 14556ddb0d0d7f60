"""Messages the daemon held across a restart: answered in arrival order with new ones, never refused as a flood."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels import Inbound
from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, hold_replayed, replay_unfinished, start_channels
from orchestrator.store import SessionStore
from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.daemon.test_reply_durability import TOKEN, bot_toml, delivered
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_DURABLE", TOKEN)
    async with FakeTelegram(token=TOKEN, username="durable_bot") as fake:
        yield fake


def left_pending(path: Path, texts: list[str]) -> None:
    """Leave `texts` accepted and never started in chat 5, as a killed process does."""
    with SessionStore(load_config(path).state_path() / "sessions.sqlite3") as store:
        for index, text in enumerate(texts):
            message = Inbound(channel="bot", chat="5", sender="5", text=text, event_id=f"old-{index}",
                              message_id=str(900 + index), is_direct=True)
            store.accept("bot", message.event_id, dataclasses.asdict(message))


async def test_held_messages_come_before_one_that_arrived_while_the_daemon_started(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.default = echo_model
    path = write_config(bot_toml(fake_llm, tg))
    left_pending(path, ["one", "two", "three"])
    live = tg.push_message(5, 5, "four")  # sent while the daemon was down: delivered once channels start
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        unfinished = runtime.store.unfinished()
        held = hold_replayed(runtime, unfinished)  # as `orchestrator run` starts
        await start_channels(runtime, ready_timeout_s=10)
        # the new message is taken (acknowledged, its turn spawned) before the replay starts,
        # as in a slow start (the provider SDK's import)
        await tg.wait_for(
            lambda: any(int(p.get("offset") or 0) > live["update_id"] for p in tg.calls("getUpdates")), timeout=20
        )
        for _ in range(5):
            await asyncio.sleep(0)  # its turn task runs as far as it can
        await replay_unfinished(runtime, unfinished, held=held)
        await tg.wait_for(lambda: len(delivered(tg)) == 4, timeout=30)
        await runtime.drain(10)
    assert delivered(tg) == ["m: one", "m: two", "m: three", "m: four"]


async def test_held_messages_past_max_queued_per_session_are_all_answered(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.default = echo_model
    path = write_config(bot_toml(fake_llm, tg).replace("[daemon]\n", "[daemon]\nmax_queued_per_session = 2\n"))
    texts = [f"m{i}" for i in range(8)]
    left_pending(path, texts)
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        unfinished = runtime.store.unfinished()
        held = hold_replayed(runtime, unfinished)
        await start_channels(runtime, ready_timeout_s=10)
        await replay_unfinished(runtime, unfinished, held=held)
        await tg.wait_for(lambda: len(delivered(tg)) == 8, timeout=30)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    assert delivered(tg) == [f"m: {t}" for t in texts]  # none refused as "busy", in order
