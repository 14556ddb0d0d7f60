"""A full disk as the stores meet it: recognised apart from faults no retry fixes, said once,
and waited out without losing or doubling a usage row (real SQLITE_FULL via max_page_count)."""

from __future__ import annotations

import errno
import io
import sqlite3
from pathlib import Path

from orchestrator.store import UsageLog, UsageRow, disk_full, read_usage


def _full_error(path: Path) -> sqlite3.Error:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE t(x)")
    db.execute("PRAGMA max_page_count=2")
    try:
        db.execute("INSERT INTO t VALUES (randomblob(100000))")
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("SQLite raised nothing")


def test_a_full_disk_is_recognised_and_other_faults_are_not(tmp_path: Path) -> None:
    full = _full_error(tmp_path / "full.sqlite3")
    assert disk_full(full) and disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(ExceptionGroup("turn", [ValueError("x"), full]))
    read_only = sqlite3.connect(f"file:{tmp_path / 'full.sqlite3'}?mode=ro", uri=True)
    try:
        read_only.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as exc:
        assert not disk_full(exc)
    assert not disk_full(OSError(errno.EACCES, "Permission denied")) and not disk_full(ValueError("x"))


def _row(n: int) -> UsageRow:
    return UsageRow(
        ts=float(n), agent="a", path="channel", sender="tg:1", session="s", provider="fake", model="m",
        input_tokens=10, output_tokens=n, cached_tokens=0,
    )


def test_usage_rows_wait_in_memory_while_the_disk_is_full_and_are_written_once(
    tmp_path: Path, debug_log: io.StringIO
) -> None:
    path = tmp_path / "usage.sqlite3"
    with UsageLog(path) as log:
        (pages,) = log._db.execute("PRAGMA page_count").fetchone()
        log._db.execute(f"PRAGMA max_page_count={pages}")  # the disk is full from here
        for n in range(300):
            log.record(_row(n))  # no event loop: each record tries a write at once
        while_full = sum(t.calls for t in read_usage(path))
        assert while_full < 300  # the first rows fit in the file's free pages, the rest could not be written...
        log._db.execute("PRAGMA max_page_count=1000000")  # space is back
        log.flush()
        log.flush()
        [total] = read_usage(path)
        assert (total.calls, total.output_tokens) == (300, sum(range(300)))  # ...and nothing was lost or doubled
    said = [line for line in debug_log.getvalue().splitlines() if "is full" in line]
    assert len(said) == 1 and "WARNING" in said[0]
    assert "not recorded" not in debug_log.getvalue()
