"""Encoded and split secrets, through the real `orchestrator run` and a fake Telegram.

The attack (issue 24 finding 5, issue 32 finding 3): a sandboxed command prints the bot
token from a workspace file as base64, URL-safe base64, hex, `od` bytes and URL-encoded, for
the model to read and repeat; a provider answers 401 with the key URL-encoded and split by
a newline, for the log to keep. One daemon (JSON logs) serves both, one message each.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
from pathlib import Path
from urllib.parse import quote

import pytest

from orchestrator.redaction import MARKER
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_calls
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.faults.kit import start, stderr_of

pytestmark = pytest.mark.slow

KEY = "sk-enc/attack+5d1f9c3a=7b2e8046"  # characters a URL encodes
URL_PY = "import urllib.parse; print(urllib.parse.quote(open('token.txt').read(), safe=''))"
B64_PY = "import base64; print(base64.b64encode(b'x' + open('token.txt', 'rb').read()).decode())"
COMMANDS = (
    ["base64", "token.txt"],
    ["basenc", "--base64url", "token.txt"],
    ["basenc", "--base16", "token.txt"],
    ["od", "-An", "-tx1", "token.txt"],
    ["python3", "-c", URL_PY],
    ["python3", "-c", B64_PY],  # the token at the second byte of a base64 group
)


def printed(content: bytes) -> list[str]:
    """What each of COMMANDS prints for a `token.txt` holding `content`."""
    return [
        base64.b64encode(content).decode(),
        base64.urlsafe_b64encode(content).decode(),
        content.hex().upper(),
        " ".join(f"{b:02x}" for b in content),
        quote(content.decode(), safe=""),
        base64.b64encode(b"x" + content).decode(),
    ]


def config_text(fake_llm: FakeOpenAI, tg: FakeTelegram, root: Path) -> str:
    return f"""
[daemon]
state_dir = "{root / 'state'}"
log_format = "json"

[providers.fake]
base_url = "{fake_llm.base_url}"
api_key = "env:ENC_TEST_PROVIDER_KEY"
max_retries = 0

[agents.a]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["shell"]
workspace = "{root / 'ws'}"

[agents.a.shell]
allowed_commands = ["base64", "basenc", "od", "python3"]

[channels.tg]
kind = "telegram"
token = "env:FAULT_TG_TOKEN"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1
format = "plain"

[[routes]]
channel = "tg"
agent = "a"
senders = ["*"]
"""


@pytest.mark.timeout(120)
async def test_an_encoded_token_and_an_echoed_key_reach_neither_the_model_nor_the_log(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENC_TEST_PROVIDER_KEY", KEY)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the sandbox sees /usr: python3 is the system one
    content = f"token={DEFAULT_TOKEN}\n".encode()
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "token.txt").write_bytes(content)
    echoed = f"Incorrect API key provided: {quote(KEY, safe='')}; you sent {KEY[:15]}\n{KEY[15:]}"
    fake_llm.script(
        tool_calls(*(("shell", {"argv": argv}) for argv in COMMANDS)),
        text("done"),
        status(401, message=echoed, should_retry=False),
    )
    config = tmp_path / "config.toml"
    async with FakeTelegram() as tg:
        config.write_text(config_text(fake_llm, tg, tmp_path))
        daemon = await start(config)
        try:
            tg.push_message(10, 10, "encode the token")
            await tg.wait_for(lambda: [p["text"] for p in tg.sent] == ["done"], timeout=60)
            tg.push_message(10, 10, "and now?")
            await tg.wait_for(lambda: len(tg.sent) == 2, timeout=30)
            await wait_for_line(daemon, "provider failure")
        finally:
            daemon.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await daemon.wait()
    # the tools ran and the model got their output, with the token in none of its forms
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(COMMANDS) and all(MARKER in r for r in results), results
    sent = json.dumps(fake_llm.requests)
    for output in printed(content):
        assert output[len(output) // 3 : 2 * len(output) // 3] not in sent, output
    assert DEFAULT_TOKEN not in sent
    # the 401's key, URL-encoded and split by a newline, is in no log line, text or JSON
    log = stderr_of(daemon)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    [incident] = [line for line in lines if "provider failure" in line["record"]["message"]]
    assert "HTTP 401" in incident["text"] and MARKER in incident["record"]["message"]
    for part in (KEY, quote(KEY, safe=""), KEY[:15], KEY[15:], json.dumps(KEY[15:])[1:-1]):
        assert part not in log, part
    assert DEFAULT_TOKEN not in log


async def wait_for_line(daemon: asyncio.subprocess.Process, needle: str) -> None:
    """Wait until the daemon's log holds `needle` (the reply is sent before the turn's lines end)."""
    async with asyncio.timeout(20):
        while needle not in stderr_of(daemon):
            await asyncio.sleep(0.05)
