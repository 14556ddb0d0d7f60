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

__all__ = ["LOCK_FILE", "StateDirLocked", "hold_state_lock"]

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
