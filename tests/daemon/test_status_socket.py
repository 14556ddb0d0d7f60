"""The status socket and document in process: a long state dir, an MCP server folded from per-agent connections."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from loguru import logger

import pytest

from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, serve_status_socket
from orchestrator.redaction import redact, register_secret
from orchestrator.status_client import ask_status, status_socket_path
from tests.conftest import WriteConfig, provider_toml
from tests.mcp.kit import agent_toml, bundle, gated_kit, wait_for

pytestmark = pytest.mark.slow


async def test_a_state_dir_past_the_unix_address_limit_still_answers(write_config: WriteConfig, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + f'[daemon]\nstate_dir = "{deep}"\n'
                        + '[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    config = load_config(path)
    socket_path = status_socket_path(config.state_path())
    assert len(os.fsencode(socket_path)) > 107  # sockaddr_un could not hold it
    async with Runtime.open(config, config_path=path) as runtime:
        async with serve_status_socket(runtime) as served:
            assert served == socket_path and socket_path.exists()
            document = await asyncio.to_thread(ask_status, config.state_path())
            assert document["channels"] == [] and document["config"]["path"] == str(path)
            assert document["uptime_s"] >= 0 and document["instance"]["pid"] == os.getpid()
        assert not socket_path.exists()  # removed at exit


async def test_a_per_agent_server_with_one_connection_down_is_degraded(write_config: WriteConfig, tmp_path: Path) -> None:
    gate, spawns = tmp_path / "gate", tmp_path / "spawns.log"
    path = write_config(
        provider_toml("http://127.0.0.1:9/v1")
        + gated_kit("kit", gate=gate, spawn_log=spawns, isolation="per_agent")
        + bundle("tools", servers={"kit": ["echo"]})
        + agent_toml("alpha", bundles=["tools"]) + agent_toml("beta", bundles=["tools"])
    )
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        await asyncio.wait_for(runtime.mcp_settled.wait(), 30)
        await wait_for(lambda: [s["state"] for s in runtime.status_document()["mcp_servers"]] == ["ready"])
        first = int(spawns.read_text().split()[0])
        gate.touch()  # the killed connection cannot come back; the other one is untouched
        os.kill(first, signal.SIGKILL)
        await wait_for(lambda: [s["state"] for s in runtime.status_document()["mcp_servers"]] == ["degraded"], timeout=30)
        (row,) = runtime.status_document()["mcp_servers"]
        assert row["name"] == "kit" and row["last_error"]
        states = sorted(c.lifecycle.value for c in runtime.services.mcp.status()) if runtime.services.mcp else []
        assert states == ["ready", "reconnecting"]
        gate.unlink()
        await wait_for(lambda: [s["state"] for s in runtime.status_document()["mcp_servers"]] == ["ready"], timeout=30)


async def test_last_errors_are_redacted_bounded_and_keep_the_lifecycle_lines(write_config: WriteConfig) -> None:
    secret = "sk-status-test-" + "q" * 24
    register_secret(secret)
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + '[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        logger.warning("an ordinary warning is not kept")
        logger.bind(lifecycle="channel tg").warning("channel tg is reconnecting (was ready): boom")
        first = runtime.status_document()["last_errors"]
        for index in range(25):
            logger.error("call {} failed with key {}", index, secret)
        errors = runtime.status_document()["last_errors"]
    assert [(e["where"], e["message"]) for e in first] == [("channel tg", "channel tg is reconnecting (was ready): boom")]
    assert len(errors) == 20 and errors[-1]["message"].startswith("call 24 failed")
    assert all(secret not in e["message"] for e in errors)
    assert errors[0]["message"] == "call 5 failed with key " + redact(secret)  # the oldest kept: 25 - 20
    assert errors[0]["where"] == __name__  # the module that logged it
