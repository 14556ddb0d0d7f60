"""A full state disk: recognised, said once per outage, and waited out by the writes that meet it."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
from collections.abc import Callable
from typing import Final, TypeVar

from loguru import logger

__all__ = ["FullDisk", "disk_full"]

_T = TypeVar("_T")

# Retrying a write that met a full disk: the first wait and the cap.
_RETRY_FIRST_S: Final = 0.2
_RETRY_CAP_S: Final = 5.0
# Free space that ends an outage (a few of SQLite's pages would not: the next write fills them).
_SPACE_BACK_BYTES: Final = 1 << 20


def disk_full(exc: BaseException) -> bool:
    """Return True when `exc` is a full disk: SQLite's SQLITE_FULL or ENOSPC (also inside a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return any(disk_full(inner) for inner in exc.exceptions)
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorname", None) or "").startswith("SQLITE_FULL")
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _free_bytes(where: str) -> int:
    """Return the bytes an unprivileged writer may still use under `where` (large when unknown)."""
    try:
        stat = os.statvfs(where)
    except OSError:
        return _SPACE_BACK_BYTES
    return stat.f_bavail * stat.f_frsize


class FullDisk:
    """Whether the state disk under `where` is full, as the daemon's writes found it.

    One warning line when a write first meets a full disk, one info line when a write
    succeeds again: an outage is two lines in the log, however many writes met it
    (intake, turns, usage rows). `wait_out` retries a write until space is back.
    """

    __slots__ = ("where", "_full")

    def __init__(self, where: str) -> None:
        self.where = where
        self._full = False

    @property
    def full(self) -> bool:
        """Return True from a write that met a full disk until one succeeds again."""
        return self._full

    def met(self) -> None:
        """A write failed for want of space: say so once for this outage."""
        if not self._full:
            self._full = True
            logger.warning(
                "the state disk under {} is full: new messages are not accepted and finished turns wait "
                "to be stored, until space is back", self.where,
            )

    def cleared(self) -> None:
        """A write succeeded: when the disk was full and has room again, say that space is back.

        A write may succeed on a disk still full (SQLite reuses its log's pages after a
        checkpoint), so the outage ends only once the filesystem reports free space: one
        outage stays one warning, not one per write that happened to fit.
        """
        if self._full and _free_bytes(self.where) >= _SPACE_BACK_BYTES:
            self._full = False
            logger.info("space is back under {}: messages are accepted and stored again", self.where)

    def attempt(self, write: Callable[[], _T]) -> tuple[bool, _T | None]:
        """Run `write()` once; (False, None) when the disk is full (noted), else (True, its result).

        Any other failure is raised as itself.
        """
        try:
            result = write()
        except (sqlite3.Error, OSError) as exc:
            if not disk_full(exc):
                raise
            self.met()
            return False, None
        self.cleared()
        return True, result

    async def wait_out(self, write: Callable[[], object], *, for_s: float | None = None) -> bool:
        """Run `write()`, retried with capped backoff while the disk is full; True once it succeeded.

        False when `for_s` seconds passed and the disk is still full (None: wait until space is
        back, or until cancelled). `write` must be safe to repeat after a failure (a failed
        SQLite statement or transaction leaves nothing behind). Other failures are raised.
        """
        loop = asyncio.get_running_loop()
        deadline = None if for_s is None else loop.time() + for_s
        delay = _RETRY_FIRST_S
        while True:
            done, _ = self.attempt(write)
            if done:
                return True
            if deadline is not None and loop.time() >= deadline:
                return False
            wait = delay if deadline is None else min(delay, max(0.0, deadline - loop.time()))
            await asyncio.sleep(wait)
            delay = min(delay * 2, _RETRY_CAP_S)
