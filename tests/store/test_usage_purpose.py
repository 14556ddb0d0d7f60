"""The usage table's `purpose` column: summary calls apart from turn calls, and a version-1 file migrated in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.store import UsageLog, UsageRow, read_usage

_VERSION_1 = """
CREATE TABLE usage (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, agent TEXT NOT NULL, path TEXT NOT NULL, sender TEXT NOT NULL,
    session TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL DEFAULT 0, cost REAL
);
INSERT INTO usage (ts, agent, path, sender, session, provider, model, input_tokens, output_tokens, cached_tokens)
    VALUES (1.0, 'ops', 'channel', 'tg:1', 's', 'fake', 'm', 100, 10, 0);
PRAGMA user_version = 1;
"""


def row(purpose: str, tokens: int) -> UsageRow:
    return UsageRow(
        ts=2.0, agent="ops", path="channel", sender="tg:1", session="s", provider="fake", model="m",
        input_tokens=tokens, output_tokens=1, cached_tokens=0, purpose="summary" if purpose == "summary" else "turn",
    )


def make_version_1(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(_VERSION_1)
    db.close()


def test_by_model_tells_summary_calls_from_turn_calls(tmp_path: Path) -> None:
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        log.record(row("turn", 50))
        log.record(row("summary", 30))
        log.record(row("summary", 20))
        by_model = {t.key: (t.calls, t.input_tokens) for t in log.totals(by="model")}
        by_agent = {t.key: t.calls for t in log.totals()}
    assert by_model == {"fake/m": (1, 50), "fake/m (summary)": (2, 50)}
    assert by_agent == {"ops": 3}  # the agent's and sender's totals include its summaries


def test_a_version_1_file_is_read_as_it_is_and_migrated_in_place_on_open(tmp_path: Path) -> None:
    path = tmp_path / "usage.sqlite3"
    make_version_1(path)
    # `orchestrator usage` reads a file an older daemon still writes: no `purpose` column yet
    assert [(t.key, t.calls) for t in read_usage(path, by="model")] == [("fake/m", 1)]
    with UsageLog(path) as log:
        log.record(row("summary", 7))
        keys = {t.key: t.input_tokens for t in log.totals(by="model")}
    assert keys == {"fake/m": 100, "fake/m (summary)": 7}  # the old row kept, counted as a turn call
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
        assert db.execute("SELECT purpose FROM usage ORDER BY id").fetchall() == [("turn",), ("summary",)]
    db.close()
    with UsageLog(path) as log:  # opened again: nothing to migrate, nothing lost
        assert sum(t.calls for t in log.totals()) == 2
