"""`[[routes]] rate_limit` through a real daemon: past it, one slow-down line, the messages kept but not run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import json

import pytest

from orchestrator import cli
from orchestrator.store import open_read_only
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "555555:EEE-limited-bot"
SENDER, OTHER = 10, 11


def limited_toml(llm_url: str, tg_url: str) -> str:
    return provider_toml(llm_url) + f"""
[agents.bot]
provider = "fake"
model = "bot-model"
autonomy = "read_only"

[channels.tg]
kind = "telegram"
token = "env:TG_LIMITED"
api_base_url = "{tg_url}"
poll_timeout_s = 1

[[routes]]
channel = "tg"
agent = "bot"
senders = ["*"]
rate_limit = {{ messages = 5, per_s = 60 }}
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_LIMITED", TOKEN)
    async with FakeTelegram(token=TOKEN, username="limited_bot") as fake:
        yield fake


def said(tg: FakeTelegram, chat: int) -> list[str]:
    return [p["text"] for p in tg.calls("sendMessage") if p["chat_id"] == chat]


async def test_fifteen_messages_in_a_row_get_five_turns_and_one_slow_down_line_and_stop_still_works(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(limited_toml(fake_llm.base_url, tg.api_base_url))
    fake_llm.default = echo_model
    async with daemon(path) as runtime:
        for i in range(15):
            tg.push_message(SENDER, SENDER, f"message {i}")
        tg.push_message(OTHER, OTHER, "me too")  # another sender's window is their own
        await tg.wait_for(lambda: len(said(tg, SENDER)) == 6 and said(tg, OTHER), timeout=20)
        await tg.wait_for(lambda: runtime.inflight == 0 and not runtime.store.unfinished(), timeout=10)  # the turns ended
        tg.push_message(SENDER, SENDER, "/stop")  # never limited
        tg.push_message(SENDER, SENDER, "/new")
        await tg.wait_for(lambda: len(said(tg, SENDER)) == 8, timeout=10)
        inbox = runtime.config.state_path() / "sessions.sqlite3"
    lines = said(tg, SENDER)
    answers = sorted(line for line in lines if line.startswith("bot-model: "))
    assert answers == [f"bot-model: message {i}" for i in range(5)]
    (slow,) = [line for line in lines if line.startswith("You are sending messages faster")]
    assert "try again in" in slow and lines[-2:] == ["Nothing is running.", "Started a new session."]
    assert said(tg, OTHER) == ["bot-model: me too"]
    assert len(fake_llm.requests) == 6
    db = open_read_only(inbox)
    try:
        (limited,) = db.execute("SELECT COUNT(*) FROM inbox WHERE state = 'limited'").fetchone()
    finally:
        db.close()
    assert limited == 10  # kept and marked, not silently lost


def test_route_and_policy_show_the_resolved_rate_limit(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(limited_toml("http://127.0.0.1:9/v1", "http://127.0.0.1:9"))  # nothing is contacted
    assert cli.main(["route", "tg", "--chat", "10", "--sender", "10", "--config", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "  rate_limit: 5 messages per 60 s per sender per chat (/stop, /new never limited)" in shown
    assert cli.main(["route", "tg", "--chat", "10", "--sender", "10", "--json", "--config", str(path)]) == 0
    described = json.loads(capsys.readouterr().out)
    assert (described["strangers"], described["rate_limit"]) == ("ignore", {"messages": 5, "per_s": 60})
    assert cli.main(["policy", "bot", "--json", "--config", str(path)]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    assert routes == {"routes[0]": {"route_id": "tg|*|bot", "strangers": "ignore", "rate_limit": {"messages": 5, "per_s": 60}}}
