"""A daemon killed with SIGKILL takes its stdio MCP servers with it (no orphan holding a call)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.mcp.kit import agent_toml, bundle, stdio_kit

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0]
    return state != "Z"  # a zombie is dead, only not yet reaped by its new parent


def test_kill_nine_of_the_daemon_kills_its_mcp_servers(write_config: WriteConfig, tmp_path: Path) -> None:
    spawns = tmp_path / "spawns.log"
    config = write_config(
        provider_toml("http://127.0.0.1:9/v1")
        + stdio_kit(spawn_log=spawns, linger=True)  # ignores its stdin closing, like a server stuck in a call
        + bundle("b", servers={"kit": ["echo"]})
        + agent_toml("a", bundles=["b"])
        + '\n[channels.tg]\nkind = "telegram"\ntoken = "env:ORPHAN_TG"\napi_base_url = "http://127.0.0.1:9"\n'
        + '\n[[routes]]\nchannel = "tg"\nagent = "a"\nsenders = ["*"]\n'
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "ORPHAN_TG": "1:fake"},
    )
    try:
        assert daemon.stderr is not None
        for line in daemon.stderr:  # the servers connect while the daemon serves: after ready too
            if "MCP server 'kit' connected" in line:
                break
        (server,) = [int(p) for p in spawns.read_text().split()]
        assert alive(server)
    finally:
        daemon.kill()
        daemon.wait()
        if daemon.stderr is not None:
            daemon.stderr.close()
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server)
