"""`orchestrator run` starts the gateway when `[gateway]` is configured, and refuses an unsafe one."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.gateway import GatewayAddress
from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import call, gateway_toml, write

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def test_orchestrator_run_serves_the_gateway_until_sigterm(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url))
    fake_llm.script(text("from the daemon"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "run", "--config", str(path),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"},
    )
    try:
        assert proc.stderr is not None
        found = None
        async with asyncio.timeout(20):
            while found is None:
                line = (await proc.stderr.readline()).decode()
                assert line, "the daemon exited before its gateway listened"
                found = re.search(r"gateway listening on http://127\.0\.0\.1:(\d+)", line)
        gw = GatewayAddress(host="127.0.0.1", port=int(found.group(1)))
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "hi", "session": "d"})
        assert (status, body["reply"]) == (200, "from the daemon")
        # a gateway turn gets its log line, as a chat's turn does (never the message text)
        turn_line = ""
        async with asyncio.timeout(20):
            while "turn gateway:d " not in turn_line:
                turn_line = (await proc.stderr.readline()).decode()
                assert turn_line, "the daemon exited before logging the turn"
        assert "turn gateway:d from gateway by ops: completed in " in turn_line and "tools run: none" in turn_line
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_orchestrator_run_refuses_a_public_gateway_without_token(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url, gateway='listen = "192.0.2.10"\n'))
    assert cli.main(["run", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: gateway.listen: '192.0.2.10' is not a loopback address" in err
