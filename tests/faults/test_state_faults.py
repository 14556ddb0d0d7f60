"""State files that fail while the daemon serves: one clear line, a clean stop, nothing lost.

A full disk is waited out (tests/faults/test_disk_full.py); a fault no retry fixes (a damaged
file, an I/O error, a store that can no longer be written) stops the daemon with exit 1; a
crash no Python code can catch (SIGBUS: the WAL's shared memory truncated under SQLite) still
leaves its line in the log, and the message is answered once after the restart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from orchestrator.store import state_fault
from tests.conftest import WriteConfig
from tests.daemon.harness import running
from tests.daemon.test_dispatch import daemon_toml
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, start, stderr_of

pytestmark = pytest.mark.slow


def _error(work: str, path: Path) -> sqlite3.Error:
    """Return the real error SQLite raises for `work` on a small WAL database at `path`."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS t(x)")
    db.execute("INSERT INTO t VALUES (randomblob(20000))")
    try:
        if work == "full":
            db.execute("PRAGMA max_page_count=2")
            db.execute("INSERT INTO t VALUES (randomblob(100000))")
        elif work == "read-only":
            sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
        elif work == "short read":
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.execute("INSERT INTO t VALUES (randomblob(50000))")
            os.truncate(f"{path}-wal", 0)
            sqlite3.connect(path).execute("SELECT sum(length(x)) FROM t").fetchall()
        elif work == "corrupt":
            db.close()
            with open(path, "r+b") as damaged:
                damaged.seek(4096)
                damaged.write(b"\xff" * 8192)
            sqlite3.connect(path).execute("SELECT sum(length(x)) FROM t").fetchall()
    except sqlite3.Error as exc:
        return exc
    raise AssertionError(f"{work}: SQLite raised nothing")


@pytest.mark.parametrize(
    ("work", "fatal"),
    [("full", None), ("read-only", "SQLITE_READONLY"), ("short read", "SQLITE_IOERR_SHORT_READ"),
     ("corrupt", "SQLITE_CORRUPT")],
)
def test_which_sqlite_faults_stop_the_daemon(tmp_path: Path, work: str, fatal: str | None) -> None:
    exc = _error(work, tmp_path / "state.sqlite3")
    reason = state_fault(exc)
    if fatal is None:
        assert reason is None  # a full disk is waited out
    else:
        assert reason is not None and fatal in reason
        assert state_fault(ExceptionGroup("turn", [ValueError("x"), exc])) == reason
    assert state_fault(ValueError("not sqlite")) is None


async def test_a_store_that_turns_read_only_stops_the_daemon_and_acknowledges_nothing(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    path = write_config(daemon_toml(fake_llm))
    fake_llm.script(text("first answer"), text("never sent"))
    async with running(path) as (runtime, terms):
        term = terms["term"]
        term.type("hello")
        await term.screen.wait_for(lambda lines: "first answer" in lines)
        assert not runtime.failed.is_set()
        # The same file, now only readable: every write SQLite is asked for fails as it would
        # on a filesystem remounted read-only.
        store_file = runtime.config.state_path() / "sessions.sqlite3"
        runtime.store._db = sqlite3.connect(f"file:{store_file}?mode=ro", uri=True, isolation_level=None)
        term.type("second")
        async with asyncio.timeout(10):
            await runtime.failed.wait()
        assert runtime.failure is not None and "SQLITE_READONLY" in runtime.failure
        await asyncio.sleep(0.3)
        assert "never sent" not in term.screen.lines
        assert len(fake_llm.requests) == 1  # the message was not accepted, so no turn ran


@pytest.mark.timeout(90)
async def test_a_crash_under_sqlite_is_logged_and_its_message_answered_once_after_restart(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        config = write_config(config_text(fake_llm, tg))
        fake_llm.script(text("answer 1"), text("answer 2"))
        proc = await start(config)
        try:
            tg.push_message(7, 7, "one")
            await tg.wait_for(lambda: [p["text"] for p in tg.sent] == ["answer 1"], timeout=20)
            shm = config.parent / "state" / "sessions.sqlite3-shm"
            assert shm.exists()
            os.truncate(shm, 0)  # an operator's mistake or a bad backup tool: SQLite's mmap now faults
            tg.push_message(7, 7, "two")
            async with asyncio.timeout(20):
                code = await proc.wait()
            assert code == -signal.SIGBUS
            assert "Fatal Python error: Bus error" in stderr_of(proc)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        again = await start(config)
        try:
            await tg.wait_for(lambda: [p["text"] for p in tg.sent] == ["answer 1", "answer 2"], timeout=20)
            await asyncio.sleep(1.0)  # nothing more arrives: neither answer is sent twice
            assert [p["text"] for p in tg.sent] == ["answer 1", "answer 2"]
        finally:
            again.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                assert await again.wait() == 0
