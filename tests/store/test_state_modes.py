"""Every folder and file a real `orchestrator run` makes for its state is 0700/0600 whatever the umask:
the state dir, the lock, every database with its -wal/-shm files, and the workspaces beside them."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.faults.kit import ROOT, config_text
from tests.observability.kit import TOKEN, gateway_port

pytestmark = pytest.mark.slow

EXTRA = """
[agents.a.memory]
scope = "agent"

[gateway]
port = 0
token = "file:gateway.token"

[[schedules]]
name = "new-year"
agent = "a"
cron = "0 0 1 1 *"
prompt = "happy new year"
"""
DATABASES = ("audit", "gateway", "memory", "schedules", "sessions", "usage")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-0022", "umask-0000"])
async def test_state_files_and_folders_are_private_whatever_the_umask(
    umask: int, write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    fake_llm.default = echo_model
    async with FakeTelegram() as tg:
        config = write_config(config_text(fake_llm, tg) + EXTRA)
        (config.parent / "gateway.token").write_text(TOKEN + "\n", encoding="utf-8")
        log = config.with_name("daemon.log")
        with open(log, "wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=sink,
                cwd=ROOT, env={**os.environ, "FAULT_TG_TOKEN": DEFAULT_TOKEN}, umask=umask,
            )
        try:
            async with asyncio.timeout(60):
                while b"ready:" not in log.read_bytes():
                    assert proc.returncode is None, log.read_text()[-2000:]
                    await asyncio.sleep(0.05)
            port = gateway_port(log.read_text())
            tg.push_message(7310061, 7310061, "hello")
            await tg.wait_for(lambda: any(p["text"] == "m: hello" for p in tg.sent), timeout=30)
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    f"http://127.0.0.1:{port}/api/agents/a/messages", json={"text": "and you?"},
                    headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "once"},
                ) as response:
                    assert response.status == 200
            # while it runs, the databases' -wal and -shm files are there too
            side = {p.name for p in (config.parent / "state").iterdir() if p.name.endswith(("-wal", "-shm"))}
            assert {"sessions.sqlite3-wal", "sessions.sqlite3-shm", "gateway.sqlite3-wal"} <= side
            assert not_private(config.parent) == {}
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                assert await proc.wait() == 0, log.read_text()[-2000:]
    assert not_private(config.parent) == {}  # and after the stop
    names = {p.name for p in (config.parent / "state").iterdir()}
    assert {f"{db}.sqlite3" for db in DATABASES} | {"daemon.lock"} <= names
    assert (config.parent / "state-workspaces" / "a").is_dir()


def not_private(folder: Path) -> dict[str, str]:
    """Return {path: mode} of everything under the state dir and the workspaces that is not 0700/0600."""
    return {
        str(path.relative_to(folder)): oct(stat.S_IMODE(path.lstat().st_mode))
        for root in (folder / "state", folder / "state-workspaces")
        for path in (root, *root.rglob("*"))
        if stat.S_IMODE(path.lstat().st_mode) != (0o700 if path.is_dir() else 0o600)
    }



def test_a_state_file_an_older_version_left_readable_is_closed_when_next_opened(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    config = write_config(provider_toml(fake_llm.base_url) + '[agents.a]\nprovider = "fake"\nmodel = "m"\n\n[agents.a.memory]\nscope = "agent"\n')
    state = config.parent / "state"
    state.mkdir(mode=0o755)
    old = sqlite3.connect(state / "memory.sqlite3")
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE kept (x)")  # a -wal beside it, left open as a crash leaves it
    for name in ("memory.sqlite3", "memory.sqlite3-wal"):
        os.chmod(state / name, 0o644)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "tools", "a", "--config", str(config)],
            capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        )
        modes = {name: stat.S_IMODE((state / name).stat().st_mode) for name in ("memory.sqlite3", "memory.sqlite3-wal")}
    finally:
        old.close()
    assert done.returncode == 0, done.stderr
    assert "memory_store" in done.stdout  # it opened the memory store
    assert modes == {"memory.sqlite3": 0o600, "memory.sqlite3-wal": 0o600}
    assert stat.S_IMODE(state.stat().st_mode) == 0o755  # a folder that was there keeps its mode
