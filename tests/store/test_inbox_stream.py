"""A streamed reply's message ids live in its inbox row (so a restart can close it), old state dirs too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.store import SessionStore


def test_stream_message_ids_are_kept_with_the_unfinished_row(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    with SessionStore(path) as store:
        assert store.accept("bot", "1", {"text": "hi"})
        store.mark("bot", "1", "running")
        store.stream_messages("bot", "1", ["41"])
        store.stream_messages("bot", "1", ["41", "42"])
    with SessionStore(path) as store:  # the next start reads what the crashed one recorded
        (row,) = store.unfinished()
    assert (row.state, row.stream) == ("running", ("41", "42"))


def test_an_unstreamed_row_has_no_stream(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "sessions.sqlite3") as store:
        store.accept("bot", "1", {"text": "hi"})
        (row,) = store.unfinished()
    assert row.stream == ()


def test_a_state_dir_from_before_streaming_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE inbox (channel TEXT NOT NULL, event_id TEXT NOT NULL, body TEXT NOT NULL,"
        " received REAL NOT NULL, state TEXT NOT NULL, reply TEXT, sent INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (channel, event_id))"
    )
    db.execute("INSERT INTO inbox VALUES ('bot', '7', '{}', 1.0, 'replying', 'the answer', 1)")
    db.commit()
    db.close()
    with SessionStore(path) as store:
        (row,) = store.unfinished()
        assert (row.reply, row.sent, row.stream) == ("the answer", 1, ())
        store.stream_messages("bot", "7", ["9"])
        assert store.unfinished()[0].stream == ("9",)
