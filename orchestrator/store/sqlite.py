"""Open the daemon's SQLite databases the same way everywhere (WAL, busy timeout, schema, integrity).

This module is the only one that calls `sqlite3.connect` (tests/store/test_one_opener.py):
every store, the memory store included, opens its file with `open_database`, and a reader
beside a running daemon with `open_read_only`, so a file that cannot be opened or is damaged
is one line naming it, whichever store it is.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from orchestrator.errors import StateCorrupt, StateError
from orchestrator.private import SIDE_FILES, private_dir, private_file
from orchestrator.store.durable import StateSyncFailed

__all__ = ["Database", "open_database", "open_read_only", "state_fault"]

_BUSY_TIMEOUT_MS: Final = 5000

# SQLite result codes (the primary part of `sqlite_errorname`) that no retry fixes: the file is
# damaged, not a database, unreadable or no longer writable. SQLITE_FULL is not among them:
# a full disk is waited out (messages stay pending and are answered once space is back).
_FATAL_CODES: Final = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN"})


def state_fault(exc: BaseException) -> str | None:
    """Return why `exc` means the state files are unusable for the rest of this run, else None.

    An `sqlite3.Error` whose code is corruption, an I/O error or a database that is no longer
    writable, or a log that could not be synced to disk (`StateSyncFailed`), wherever it was
    raised, also inside an exception group; a full disk, a busy
    database or a programming error is None.
    """
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (reason := state_fault(inner)) is not None:
                return reason
        return None
    if isinstance(exc, StateSyncFailed):
        return str(exc)
    if not isinstance(exc, sqlite3.Error):
        return None
    name = getattr(exc, "sqlite_errorname", None) or ""
    if "_".join(name.split("_")[:2]) in _FATAL_CODES:  # SQLITE_IOERR_WRITE -> SQLITE_IOERR
        return f"{exc} ({name})"
    return None


def open_database(path: Path, schema: str) -> sqlite3.Connection:
    """Create the folder (0700) and the file (0600), connect in autocommit mode with WAL, and apply `schema`.

    Raises `StateError` (one line: the file and why) when the folder or file cannot be made
    or opened, or the file is not a usable database, and `StateCorrupt` when SQLite finds
    damaged pages in it.

    The connection may be used from a worker thread (callers serialise access); it is
    closed again if the schema cannot be applied.
    """
    try:
        private_dir(path.parent)
        private_file(path, side_files=SIDE_FILES)  # 0600 first: SQLite gives its side files the same mode
        db = _connect(path)
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


def open_read_only(path: Path) -> sqlite3.Connection:
    """Connect to the existing file at `path` read-only (a running daemon may be writing it); create nothing.

    Raises `StateError` (one line: the file and why) when it cannot be opened. Reads through
    the connection raise `sqlite3.Error` for a damaged file: the caller translates them.
    """
    try:
        db = _connect(path, read_only=True)
        db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    except sqlite3.Error as exc:
        raise StateError(str(path), str(exc)) from exc
    return db


def _connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    # The one `sqlite3.connect`: autocommit, usable from a worker thread (callers serialise access).
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False)


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
