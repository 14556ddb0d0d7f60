"""`orchestrator status` and `/health` against one real `orchestrator run`: states, the document, the socket.

One daemon serves the whole module (a Telegram channel on the fake Bot API, an MCP server
behind a gate, the gateway with metrics); each test leaves it healed as it found it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
import pytest_asyncio

from orchestrator.status_client import ask_status, status_socket_path
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.mcp.kit import bundle, gated_kit

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
MANY = 10_000  # failures queued: more than any wait here lets through


def status_schema() -> dict[str, Any]:
    """Return the JSON schema docs/status.md pins (the first json block under `## Schema`)."""
    text = (ROOT / "docs" / "status.md").read_text(encoding="utf-8")
    section = text.split("\n## Schema\n", 1)[1]
    block = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert block is not None, "docs/status.md: no json block under ## Schema"
    schema: dict[str, Any] = json.loads(block.group(1))
    return schema


@dataclass
class Running:
    config: Path
    state: Path
    log: Path
    gate: Path
    spawn_log: Path
    proc: asyncio.subprocess.Process
    tg: FakeTelegram
    port: int

    async def status(self) -> dict[str, Any]:
        return await asyncio.to_thread(ask_status, self.state)

    async def until(self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float = 40.0) -> dict[str, Any]:
        """Ask for the document until `predicate` holds for it; return that document."""
        async with asyncio.timeout(timeout):
            while True:
                document = await self.status()
                if predicate(document):
                    return document
                await asyncio.sleep(0.05)

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{self.port}{path}") as response:
            return response.status, await response.text()


def channel(document: dict[str, Any], name: str) -> dict[str, Any]:
    row: dict[str, Any] = next(c for c in document["channels"] if c["name"] == name)
    return row


def server(document: dict[str, Any], name: str) -> dict[str, Any]:
    row: dict[str, Any] = next(s for s in document["mcp_servers"] if s["name"] == name)
    return row


def config_text(fake: FakeOpenAI, tg: FakeTelegram, gate: Path, spawn_log: Path) -> str:
    return (
        provider_toml(fake.base_url)
        + '[agents.helper]\nprovider = "fake"\nmodel = "m"\nmcp_bundles = ["tools"]\n'
        + f'[channels.tg]\nkind = "telegram"\ntoken = "env:STATUS_TG_TOKEN"\napi_base_url = "{tg.api_base_url}"\n'
        + "poll_timeout_s = 1\n"
        + '[[routes]]\nchannel = "tg"\nagent = "helper"\nsenders = ["*"]\n'
        + gated_kit("kit", gate=gate, spawn_log=spawn_log)
        + bundle("tools", servers={"kit": ["echo"]})
        + '[gateway]\nport = 0\nmetrics = true\n'
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    folder = tmp_path_factory.mktemp("status")
    gate, spawn_log, log = folder / "gate", folder / "spawns.log", folder / "daemon.log"
    async with FakeOpenAI(default=None) as fake, FakeTelegram() as tg:
        config = folder / "config.toml"
        config.write_text(config_text(fake, tg, gate, spawn_log), encoding="utf-8")
        with open(log, "wb") as errors:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=errors,
                cwd=ROOT, env={**os.environ, "STATUS_TG_TOKEN": DEFAULT_TOKEN},
            )
        try:
            async with asyncio.timeout(40):
                while not (found := re.search(r"gateway listening on http://127\.0\.0\.1:(\d+)", log.read_text())):
                    assert proc.returncode is None, log.read_text()
                    await asyncio.sleep(0.05)
            daemon = Running(config, folder / "state", log, gate, spawn_log, proc, tg, int(found.group(1)))
            while not status_socket_path(daemon.state).exists():
                await asyncio.sleep(0.05)
            await daemon.until(lambda d: channel(d, "tg")["state"] == "ready" and server(d, "kit")["state"] == "ready")
            yield daemon
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(20):
                        await proc.wait()
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_document_matches_the_schema_in_the_docs(running: Running) -> None:
    code, out, err = await cli("status", "--json", "--config", str(running.config))
    assert code == 0, err
    document = json.loads(out)
    jsonschema.Draft202012Validator(status_schema()).validate(document)
    assert document["instance"]["pid"] == running.proc.pid
    assert document["config"] == {
        "path": str(running.config), "sha256": hashlib.sha256(running.config.read_bytes()).hexdigest(),
    }
    assert [(c["name"], c["kind"], c["state"]) for c in document["channels"]] == [("tg", "telegram", "ready")]
    assert [(s["name"], s["state"]) for s in document["mcp_servers"]] == [("kit", "ready")]
    assert (document["turns_running"], document["inbox"]["depth"], document["approvals"]["pending"]) == (0, 0, 0)
    assert document["deliveries"] == {"waiting": 0, "oldest_age_s": None}
    # the readable form says the same
    code, out, _ = await cli("status", "--config", str(running.config))
    assert code == 0
    assert re.search(r"^  tg\s+telegram\s+ready\s", out, re.MULTILINE), out
    assert re.search(r"^  kit\s+ready\s", out, re.MULTILINE), out


async def test_every_field_of_the_schema_says_what_it_means() -> None:
    def walk(node: dict[str, Any], where: str) -> list[str]:
        missing = []
        for name, field in node.get("properties", {}).items():
            if "description" not in field and "$ref" not in field:
                missing.append(f"{where}.{name}")
            missing += walk(field, f"{where}.{name}")
        items = node.get("items")
        if isinstance(items, dict):
            missing += walk(items, f"{where}[]")
        return missing

    schema = status_schema()
    assert walk(schema, "status") == []
    assert schema["properties"]["schema"]["const"] == 1  # the version build_status writes


async def test_health_detail_carries_the_same_document(running: Running) -> None:
    code, body = await running.get("/health")
    plain = json.loads(body)
    assert (code, plain["status"], plain["channels"]["tg"]["state"]) == (200, "ok", "ready")
    assert "detail" not in plain
    code, body = await running.get("/health?detail=1")
    detailed = json.loads(body)
    assert code == 200 and {k: v for k, v in detailed.items() if k != "detail"} == plain
    jsonschema.Draft202012Validator(status_schema()).validate(detailed["detail"])
    assert detailed["detail"]["instance"]["pid"] == running.proc.pid


async def test_a_channel_that_loses_its_platform_is_not_ready_until_it_heals(running: Running) -> None:
    tg = running.tg
    tg.fail_next("getUpdates", status=500, description="Internal Server Error", times=MANY)
    tg.fail_next("getMe", status=500, description="Internal Server Error", times=MANY)
    tg.drop_connections()  # the long poll in flight is cut; every poll after it fails
    try:
        # polls retried in place: degraded; then the supervisor gives up the connection: reconnecting
        down = await running.until(lambda d: channel(d, "tg")["state"] == "reconnecting")
        row = channel(down, "tg")
        assert "Internal Server Error" in (row["last_error"] or "")
        lines = [e["message"] for e in down["last_errors"] if e["where"] == "channel tg"]
        assert any("is degraded (was ready)" in line for line in lines), lines
        assert any("is reconnecting (was degraded)" in line for line in lines), lines
        jsonschema.Draft202012Validator(status_schema()).validate(down)
        code, body = await running.get("/health")
        health = json.loads(body)
        assert (code, health["status"]) == (503, "degraded")
        assert health["channels"]["tg"] == {"kind": "telegram", "state": "reconnecting", "ready": False, "error": None}
        _, metrics = await running.get("/metrics")
        assert 'orchestrator_channel_state{channel="tg",kind="telegram",state="reconnecting"} 1.0' in metrics
        assert 'orchestrator_channel_up{channel="tg",kind="telegram"} 0.0' in metrics
    finally:
        tg.heal("getUpdates")
        tg.heal("getMe")
    healed = await running.until(lambda d: channel(d, "tg")["state"] == "ready")
    assert channel(healed, "tg")["since"] > channel(down, "tg")["since"]
    code, body = await running.get("/health")
    assert (code, json.loads(body)["status"]) == (200, "ok")
    assert "channel tg is ready (was reconnecting)" in running.log.read_text()


async def test_a_killed_mcp_server_is_reconnecting_until_it_is_back(running: Running) -> None:
    pid = int(running.spawn_log.read_text().split()[-1])
    running.gate.touch()  # the restarted server exits at once while the gate stands
    try:
        os.kill(pid, signal.SIGKILL)
        down = await running.until(
            lambda d: server(d, "kit")["state"] == "reconnecting" and bool(server(d, "kit")["last_error"])
        )
        code, body = await running.get("/health")
        health = json.loads(body)
        assert code == 503 and [(m["server"], m["state"], m["ready"]) for m in health["mcp"]] == [
            ("kit", "reconnecting", False)
        ]
        assert any(e["where"] == "mcp kit" and "is reconnecting (was ready)" in e["message"] for e in down["last_errors"])
        _, metrics = await running.get("/metrics")
        assert 'orchestrator_mcp_server_state{agent="",server="kit",state="reconnecting"} 1.0' in metrics
    finally:
        running.gate.unlink()
    back = await running.until(lambda d: server(d, "kit")["state"] == "ready")
    assert server(back, "kit")["since"] > server(down, "kit")["since"]
    assert int(running.spawn_log.read_text().split()[-1]) != pid


async def test_the_socket_is_the_daemons_users_alone_and_bounded(running: Running) -> None:
    path = status_socket_path(running.state)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loop = asyncio.get_running_loop()

    async def exchange(data: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.setblocking(False)
            await loop.sock_connect(client, str(path))
            if data:
                await loop.sock_sendall(client, data)
            answer = b""
            try:
                async with asyncio.timeout(20):
                    while chunk := await loop.sock_recv(client, 65536):
                        answer += chunk
            except ConnectionResetError:  # closed with the rest of the request unread
                pass
            return answer

    # a request past the bound is cut off: never a document
    assert b'"channels"' not in await exchange(b"status" + b"x" * 100_000 + b"\n")
    # one that is not `status` is refused
    refused = json.loads(await exchange(b"status --all\n"))
    assert refused["error"] == "bad_request" and "channels" not in refused
    # a client that says nothing is dropped (the daemon closes; recv sees the end)
    assert await exchange(b"") == b""
    # and the daemon still answers the next one
    assert (await running.status())["schema"] == 1


async def test_no_daemon_is_exit_3_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(provider_toml("http://127.0.0.1:9/v1") + '[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    code, out, err = await cli("status", "--config", str(config))
    assert (code, out) == (3, "")
    assert err.count("\n") == 1 and "no daemon is running" in err and "no socket" in err
    # a socket left by a daemon that died: nothing listens, the connection is refused
    path = status_socket_path(tmp_path / "state")
    path.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))
    code, _, err = await cli("status", "--json", "--config", str(config))
    assert code == 3 and err.count("\n") == 1 and "connection refused" in err
