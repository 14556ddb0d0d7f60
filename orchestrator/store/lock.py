"""One daemon per state directory: an exclusive `flock` held for the daemon's whole life."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from orchestrator.errors import OrchestratorError, StateError
from orchestrator.private import private_dir, private_file

__all__ = ["LOCK_FILE", "StateDirLocked", "hold_state_lock", "state_lock_holder"]

LOCK_FILE: Final = "daemon.lock"


class StateDirLocked(OrchestratorError):
    """Another daemon holds the state directory; two would answer the same inbox twice."""

    def __init__(self, path: Path, holder: str) -> None:
        self.path, self.holder = path, holder
        super().__init__(
            f"another orchestrator daemon ({holder}) is running on {path.parent}; "
            "stop it first, or give this one its own [daemon] state_dir"
        )


@contextmanager
def hold_state_lock(state_dir: Path) -> Iterator[None]:
    """Hold `state_dir/daemon.lock` exclusively until exit; raise `StateDirLocked` if held.

    The kernel releases a `flock` when its holder dies (kill -9 included), so a stale file
    never blocks a restart; the pid written into it only names the holder in the error.
    """
    path = state_dir / LOCK_FILE
    try:
        private_dir(state_dir)
        private_file(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StateError(str(path), exc.strerror or type(exc).__name__) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raw = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            raise StateDirLocked(path, f"pid {raw}" if raw.isdigit() else "pid unknown") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def state_lock_holder(state_dir: Path) -> int | None:
    """Return the pid of the process holding `state_dir`'s daemon lock, None when none does.

    Read from /proc/locks, never by taking the lock (even a shared one would make a daemon
    starting at that instant think another one runs); creates nothing.
    """
    try:
        info = os.stat(state_dir / LOCK_FILE, follow_symlinks=False)
        rows = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for row in rows:
        fields = row.split()
        # `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; a blocked waiter's row has `->` first
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            return int(fields[4])
    return None
