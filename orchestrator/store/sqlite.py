"""Open the daemon's SQLite databases the same way everywhere (WAL, busy timeout, schema)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from orchestrator.errors import StateCorrupt, StateError

__all__ = ["Database", "open_database"]

_BUSY_TIMEOUT_MS: Final = 5000


def open_database(path: Path, schema: str) -> sqlite3.Connection:
    """Create the folder, connect in autocommit mode with WAL, and apply `schema`.

    Raises `StateError` (one line: the file and why) when the folder or file cannot be made
    or opened, or the file is not a usable database, and `StateCorrupt` when SQLite finds
    damaged pages in it.

    The connection may be used from a worker thread (callers serialise access); it is
    closed again if the schema cannot be applied.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StateError(str(path), getattr(exc, "strerror", None) or str(exc)) from exc
    try:
        db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(schema)
        # quick_check reads every page once (milliseconds for a state store): a damaged inner
        # page is one clear line now, not a traceback (and a restart loop) at the first read.
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        db.close()
        if "malformed" in str(exc):
            raise StateCorrupt(str(path), str(exc)) from exc
        raise StateError(str(path), str(exc)) from exc
    if problems != ["ok"]:
        db.close()
        raise StateCorrupt(str(path), "; ".join(problems)[:300])
    return db


class Database:
    """A store backed by one SQLite file: opened by `open_database`, closed as a context manager."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._db = open_database(path, schema)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database."""
        self._db.close()
