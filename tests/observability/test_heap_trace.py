"""ORCHESTRATOR_TRACEMALLOC=FILE: the first SIGUSR2 starts tracing, each later one appends the
allocation sites that grew (file:line) to FILE; without the variable nothing changes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

from orchestrator.observability import TRACEMALLOC_ENV, HeapTraceSettingInvalid, heap_trace_from_env
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, start, stderr_of

pytestmark = pytest.mark.slow


def _signal_until(path: Path, fragment: str) -> str:
    """Send SIGUSR2 to this process, then wait until `path` holds `fragment`; return the text."""
    os.kill(os.getpid(), signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while fragment not in (found := path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"{fragment!r} never reached {path}: {found[-500:]}"
        time.sleep(0.01)  # the handler runs in this thread, between bytecodes
    return found


def test_the_second_sigusr2_dumps_the_line_that_allocated(tmp_path: Path) -> None:
    dump = tmp_path / "heap.txt"
    with heap_trace_from_env({TRACEMALLOC_ENV: str(dump)}) as trace:
        assert trace is not None and not trace.tracing
        _signal_until(dump, "=== tracing started")
        assert trace.tracing
        kept = [bytearray(4096) for _ in range(500)]  # about 2 MiB from this very line
        line = 1 + next(i for i, src in enumerate(Path(__file__).read_text().splitlines()) if "kept = [bytearray" in src)
        written = _signal_until(dump, "=== dump 1")
    assert kept
    assert not trace.tracing  # closed with the block
    growth = written.split("since the previous dump", 1)[1]
    assert f"{__file__}:{line}" in growth.split("\n---", 1)[0]  # named among the top lines by growth


def test_without_the_variable_nothing_is_traced_and_sigusr2_is_untouched(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGUSR2)
    with heap_trace_from_env({}) as trace:
        assert trace is None
        assert signal.getsignal(signal.SIGUSR2) is before


def test_a_frames_value_that_is_not_a_number_names_the_variable(tmp_path: Path) -> None:
    env = {TRACEMALLOC_ENV: str(tmp_path / "heap.txt"), "ORCHESTRATOR_TRACEMALLOC_FRAMES": "lots"}
    with pytest.raises(HeapTraceSettingInvalid, match="ORCHESTRATOR_TRACEMALLOC_FRAMES='lots'"):
        with heap_trace_from_env(env):
            pass


async def _wait_file(path: Path, fragment: str, proc: asyncio.subprocess.Process) -> str:
    async with asyncio.timeout(60):
        while fragment not in (found := path.read_text() if path.exists() else ""):
            assert proc.returncode is None, stderr_of(proc)[-2000:]
            await asyncio.sleep(0.05)
    return found


@pytest.mark.timeout(120)
async def test_the_daemon_dumps_on_sigusr2_when_asked(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "daemon-heap.txt"
    monkeypatch.setenv(TRACEMALLOC_ENV, str(dump))  # the daemon child inherits this environment
    async with FakeTelegram() as tg:
        proc = await start(write_config(config_text(fake_llm, tg)))
        try:
            proc.send_signal(signal.SIGUSR2)
            await _wait_file(dump, "=== tracing started", proc)
            fake_llm.script(text("m: msg-1"))
            tg.push_message(10, 10, "msg-1")
            await tg.wait_for(lambda: any(p["text"] == "m: msg-1" for p in tg.sent), timeout=30)
            proc.send_signal(signal.SIGUSR2)
            written = await _wait_file(dump, "--- biggest growths", proc)
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert re.search(r"^\s+[+-][\d,.]+\s+[+-][\d,]+\s+\S+\.py:\d+$", written, re.MULTILINE), written[:2000]
    assert re.search(r"SQLite holds [\d,]+ KiB", written)  # its page caches, which tracemalloc does not see
    assert "Traceback" not in stderr_of(proc)
