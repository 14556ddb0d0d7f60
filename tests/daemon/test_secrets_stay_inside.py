"""Secrets stay inside: a real Telegram channel at DEBUG, a provider that echoes its key."""

from __future__ import annotations

import io
import re
from urllib.parse import quote
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.redaction import MARKER
from tests.conftest import WriteConfig
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI, status
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "333333:CCC-secret-bot-token"
API_KEY = "sk-echoed-0123456789abcdef"


def bot_toml(fake_llm: FakeOpenAI, tg: FakeTelegram) -> str:
    return f"""
[providers.fake]
base_url = "{fake_llm.base_url}"
api_key = "env:FAKE_LLM_KEY"
max_retries = 0

[agents.ops]
provider = "fake"
model = "ops-model"
autonomy = "full"

[channels.ops_bot]
kind = "telegram"
token = "env:TG_SECRET_BOT"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[[routes]]
channel = "ops_bot"
agent = "ops"
senders = ["*"]
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_SECRET_BOT", TOKEN)
    monkeypatch.setenv("FAKE_LLM_KEY", API_KEY)
    async with FakeTelegram(token=TOKEN, username="ops_bot") as fake:
        yield fake


def replies(tg: FakeTelegram) -> list[str]:
    return [p["text"] for p in tg.calls("sendMessage", token=TOKEN)]


def state_bytes(state: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file())


async def test_telegram_at_debug_logs_no_token(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    fake_llm.default = echo_model
    async with daemon(write_config(bot_toml(fake_llm, tg))):
        tg.push_message(10, 10, "hello", token=TOKEN)
        await tg.wait_for(lambda: replies(tg) == ["ops-model: hello"], timeout=20)
    log = debug_log.getvalue()
    assert "DEBUG" in log and "telegram" in log  # PTB's own debug lines went through the sink
    assert TOKEN not in log and TOKEN.split(":")[1] not in log
    assert f"/bot{MARKER}" in log  # PTB's "Set Bot API URL: .../bot<token>" line, redacted


async def test_a_provider_echoing_its_key_never_reaches_the_chat_or_the_store(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    fake_llm.refuse_key = True
    async with daemon(write_config(bot_toml(fake_llm, tg))) as runtime:
        state = runtime.config.state_path()
        tg.push_message(10, 10, "what is my key?", token=TOKEN)
        await tg.wait_for(lambda: len(replies(tg)) == 1, timeout=20)
        live = state_bytes(state)  # the -wal file too, before the close checkpoints it
    assert fake_llm.authorizations == [f"Bearer {API_KEY}"]  # the attack was real: the key went out
    [reply] = replies(tg)
    found = re.fullmatch(
        r"Sorry, the model provider failed \(incident ([0-9a-f]{6})\); the operator can find the details in the log\.",
        reply,
    )
    assert found is not None, reply
    for stored in (live, state_bytes(state)):
        assert API_KEY.encode() not in stored
        assert fake_llm.base_url.encode() not in stored and b"Incorrect API key" not in stored
        assert found.group(1).encode() in stored  # the transcript holds the generic line
    log = debug_log.getvalue()
    assert API_KEY not in log
    [line] = [ln for ln in log.splitlines() if ln.startswith("WARNING") and f"incident {found.group(1)}" in ln]
    assert fake_llm.base_url in line and "HTTP 401" in line and f"Incorrect API key provided: {MARKER}" in line
    assert f"by ops: provider_error (incident {found.group(1)}) in " in log  # the turn's one INFO line


async def test_a_401_body_with_the_key_url_encoded_and_split_logs_no_part_of_it(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The key once percent-encoded (as a proxy quoting a query string does) and once split by a
    # newline: redacted literally, and the newline collapsed after, both reached the log.
    key = "sk-echoed/0123456789+abcdef"  # characters a URL encodes
    monkeypatch.setenv("FAKE_LLM_KEY", key)
    body = f"bad key {quote(key, safe='')} in {key[:13]}\n{key[13:]}"
    fake_llm.script(status(401, message=body, should_retry=False))
    async with daemon(write_config(bot_toml(fake_llm, tg))):
        tg.push_message(10, 10, "hi", token=TOKEN)
        await tg.wait_for(lambda: len(replies(tg)) == 1, timeout=20)
    log = debug_log.getvalue()
    [line] = [ln for ln in log.splitlines() if ln.startswith("WARNING") and "incident" in ln]
    assert "HTTP 401" in line and f"bad key {MARKER} in {MARKER}" in line
    for part in (key[:13], key[13:], quote(key, safe="")):
        assert part not in log, part
