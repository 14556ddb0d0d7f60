"""Open the daemon's SQLite databases the same way everywhere (WAL, busy timeout, schema)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Final, Self

__all__ = ["Database", "open_database"]

_BUSY_TIMEOUT_MS: Final = 5000


def open_database(path: Path, schema: str) -> sqlite3.Connection:
    """Create the folder, connect in autocommit mode with WAL, and apply `schema`.

    The connection may be used from a worker thread (callers serialise access); it is
    closed again if the schema cannot be applied.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(schema)
    except sqlite3.Error:
        db.close()
        raise
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
