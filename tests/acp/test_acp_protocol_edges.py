"""`orchestrator acp` against raw JSON-RPC lines, as the spec and the TypeScript SDK expect:
bad lines are answered and survived, versions negotiated, notifications screened."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION

import pytest

from tests.acp.harness import ROOT
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text

pytestmark = pytest.mark.slow

CONFIG = """
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.dev]
provider = "fake"
model = "dev-model"
"""


class Wire:
    """Raw newline-delimited JSON-RPC over the agent's stdio."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._next = 0

    async def line(self, raw: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw.encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self._next += 1
        await self.line(json.dumps({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}))
        return self._next

    async def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(20):
            message: dict[str, Any] = json.loads(await self.proc.stdout.readline())
        return message

    async def answer(self, request: int) -> dict[str, Any]:
        """Skip notifications (session updates) until the response to `request`."""
        while True:
            message = await self.read()
            if message.get("id") == request and "method" not in message:
                return message


@asynccontextmanager
async def wire(config: Path) -> AsyncIterator[Wire]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "acp", "--agent", "dev", "--config", str(config),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env={k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LC_", "LANG", "PATH"))},
    )
    try:
        yield Wire(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        async with asyncio.timeout(20):
            await proc.wait()


async def initialized(w: Wire, version: int = PROTOCOL_VERSION) -> dict[str, Any]:
    return await w.answer(await w.request("initialize", {"protocolVersion": version, "clientCapabilities": {}}))


async def test_lines_that_are_not_requests_are_answered_and_the_agent_keeps_serving(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    async with wire(config) as w:
        for raw in ("[1, 2]", "42", '"hello"', "not json at all", '{"jsonrpc": "2.0", "id": '):
            await w.line(raw)
        answers = [await w.read() for _ in range(5)]
        assert [(a["id"], a["error"]["code"]) for a in answers] == [
            (None, -32600), (None, -32600), (None, -32600), (None, -32700), (None, -32700)
        ]
        assert (await initialized(w))["result"]["protocolVersion"] == PROTOCOL_VERSION  # still serving
        assert w.proc.stderr is not None
    stderr = (await w.proc.stderr.read()).decode()
    assert w.proc.returncode == 0 and "Traceback" not in stderr


async def test_versions_are_negotiated_and_sessions_need_initialize_first(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    async with wire(config) as w:
        early = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
        assert early["error"]["code"] == -32600 and "initialize" in json.dumps(early["error"])
        for asked in (0, PROTOCOL_VERSION + 1):  # unsupported: the latest we support
            assert (await initialized(w, asked))["result"]["protocolVersion"] == PROTOCOL_VERSION
        await w.line(json.dumps({"jsonrpc": "2.0", "method": "$/unknown/thing", "params": {}}))
        new = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
        assert "sessionId" in new["result"]
        assert w.proc.stderr is not None
    stderr = (await w.proc.stderr.read()).decode()
    assert "Traceback" not in stderr and "unknown/thing" not in stderr  # ignored quietly


async def test_cancel_request_ends_a_running_prompt_cancelled(write_config: WriteConfig) -> None:
    async with FakeOpenAI(default=None, latency_s=30) as slow:
        slow.script(text("too late"))
        config = write_config(CONFIG.format(base_url=slow.base_url))
        async with wire(config) as w:
            await initialized(w)
            new = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
            session = new["result"]["sessionId"]
            running = await w.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "slow"}]})
            async with asyncio.timeout(20):
                while not slow.requests:
                    await asyncio.sleep(0.02)
            await w.line(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": running}}))
            assert (await w.answer(running))["result"]["stopReason"] == "cancelled"


async def test_an_image_block_is_refused_explicitly(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    async with wire(config) as w:
        init = await initialized(w)
        assert init["result"]["agentCapabilities"]["promptCapabilities"].get("image", False) is False
        new = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
        picture = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        refused = await w.answer(await w.request(
            "session/prompt", {"sessionId": new["result"]["sessionId"], "prompt": [{"type": "text", "text": "look"}, picture]}
        ))
        assert refused["error"]["code"] == -32602 and "does not accept image" in json.dumps(refused["error"])
    assert fake_llm.requests == []


def test_stdout_and_stdin_may_be_regular_files(write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    # `orchestrator acp ... < requests.jsonl > answers.jsonl`: the library's stdio only takes pipes
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}}}) + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                      "params": {"cwd": str(tmp_path), "mcpServers": []}}) + "\n"
    )
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "acp", "--agent", "dev", "--config", str(config)],
            stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, timeout=60, check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    replies = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [r.get("id") for r in replies] == [1, 2]
    assert replies[0]["result"]["protocolVersion"] == PROTOCOL_VERSION
    assert replies[1]["result"]["sessionId"]
    assert b"Pipe transport" not in done.stderr
