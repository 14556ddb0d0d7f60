"""The daemon's own folders are created 0700 and its state files 0600, whatever the umask.

The state databases hold transcripts, memories and usage by sender; under a default umask
of 0022 they were created 0644, readable by every user of the host. A database file made
here first is one SQLite keeps: it creates its `-wal` and `-shm` files with the database's
own mode. Folders that already exist keep their mode (a state dir may be a folder the admin
made); files that exist lose any group and other bits, so a state dir from before is closed
on its next start.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["SIDE_FILES", "private_dir", "private_file"]

# What SQLite keeps beside a database in WAL mode (and the rollback journal it may leave).
SIDE_FILES: Final = ("-wal", "-shm", "-journal")
_DIR_MODE: Final = 0o700
_FILE_MODE: Final = 0o600


def private_dir(path: Path) -> None:
    """Create `path` and its missing parents, each exactly 0700; an existing folder is left as it is.

    Raises `OSError` as `mkdir` does (a parent that is a file, a read-only place).
    """
    missing: list[Path] = []
    folder = path
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=_DIR_MODE)
        except FileExistsError:  # made meanwhile by someone else: theirs, not ours to change
            continue
        os.chmod(folder, _DIR_MODE)  # the umask may have taken bits mkdir's mode asked for
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))


def private_file(path: Path, *, side_files: tuple[str, ...] = ()) -> None:
    """Create `path` empty and exactly 0600, or take group and other bits off an existing one.

    `side_files` are suffixes of files beside it (a database's `-wal`, `-shm`) treated the
    same way when they exist. Raises `OSError` when the file can neither be made nor opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
    except FileExistsError:
        _tighten(path)
    else:
        try:
            os.fchmod(fd, _FILE_MODE)
        finally:
            os.close(fd)
    for suffix in side_files:
        _tighten(path.with_name(path.name + suffix))


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            os.chmod(path, mode & ~0o077)
    except FileNotFoundError:
        return
    except PermissionError:  # not the daemon's file: SQLite says whether it can use it
        return
