"""The terminal channel chats on a terminal or piped input; with nothing to read it is disabled in one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from channels import ChannelUnusable
from channels.terminal import TerminalAdapter
from tests.conftest import WriteConfig

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def never(_: object) -> None:
    raise AssertionError("nothing should be delivered")


async def test_dev_null_on_stdin_disables_the_channel() -> None:
    with open(os.devnull, "rb") as null:
        adapter = TerminalAdapter(name="term", user="op", chat="local", stdin=null)
        with pytest.raises(ChannelUnusable) as refused:
            await adapter.run(never, lambda: None)
    assert "stdin is not a terminal" in refused.value.reason


async def test_a_closed_stdin_disables_the_channel() -> None:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    stdin = os.fdopen(read_fd, "rb", buffering=0)
    stdin.close()
    adapter = TerminalAdapter(name="term", user="op", chat="local", stdin=stdin)
    with pytest.raises(ChannelUnusable) as refused:
        await adapter.run(never, lambda: None)
    assert refused.value.reason.startswith("stdin is closed")


async def test_piped_lines_still_reach_the_daemon() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"hello\n")
    os.close(write_fd)
    got: list[object] = []
    ready = asyncio.Event()

    async def deliver(item: object) -> None:
        got.append(item)

    adapter = TerminalAdapter(name="term", user="op", chat="local", stdin=os.fdopen(read_fd, "rb", buffering=0))
    task = asyncio.create_task(adapter.run(deliver, ready.set))
    try:
        async with asyncio.timeout(5):
            while not got:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert ready.is_set() and [getattr(item, "text", None) for item in got] == ["hello"]


def test_the_example_config_under_systemd_stdin_warns_once_and_calls_nothing_ready(tmp_path: Path) -> None:
    # StandardInput=null: the newcomer's `orchestrator run` under systemd, on the example config
    config = tmp_path / "config.toml"
    shutil.copy(ROOT / "config.example.toml", config)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    assert daemon.stderr is not None
    lines: list[str] = []
    for line in daemon.stderr:
        lines.append(line)
        if "ready:" in line:
            break
    daemon.terminate()
    _, rest = daemon.communicate(timeout=30)
    log = "".join(lines) + rest
    assert daemon.returncode == 0, log
    assert [line for line in lines if "is disabled" in line] == [
        next(line for line in lines if "channel terminal is disabled: stdin is not a terminal" in line)
    ]
    assert "ready: channels none" in log
    assert "Traceback" not in log and "PermissionError" not in log and "is down" not in log
