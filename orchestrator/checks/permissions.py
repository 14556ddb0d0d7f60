"""Secret files and state files that other users can read (any group or other bit set).

A `file:` secret or a state database readable by others hands its tokens, transcripts and
memories to every account on the machine. The daemon makes its own files 0600 when it
creates them; a file copied in, or made before that rule, keeps whatever mode it got. A file
behind a folder others may not enter (no group or other search bit on it or above it, as
systemd's 0700 `/var/lib/private` for a DynamicUser's state) is out of their reach: not reported.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from orchestrator.checks.secret_files import secret_references
from orchestrator.config import Config, dotted, secret_file
from orchestrator.errors import ConfigProblem

__all__ = ["permission_problems"]

_OPEN_BITS: Final = 0o077
_SEARCH_BITS: Final = 0o011  # group or other may enter the folder
_SHOWN: Final = 3
_MAX_WALKED: Final = 10_000  # a state directory holds a handful of files; stop early in a huge one


def permission_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem per `file:` secret, and one for the state directory, readable by others."""
    problems: list[ConfigProblem] = []
    base = config.source.parent if config.source else None
    for loc, ref in secret_references(config):
        if ref.scheme != "file":
            continue
        path = secret_file(ref, base=base)
        try:
            mode = path.stat().st_mode
            reachable = _reachable(path.resolve().parent)
        except OSError:
            continue  # the secrets check says why it cannot be read
        if mode & _OPEN_BITS and reachable:
            file = config.origin_of(str(loc[1])) if loc[:1] == ("agents",) else shown
            problems.append(ConfigProblem(
                file, dotted(loc),
                f"{ref!r} is readable by others (mode {stat.S_IMODE(mode):04o}): `chmod 600 {path}`",
            ))
    state = config.state_path()
    open_files = list(_open_entries(state))
    if open_files:
        named = ", ".join(f"{p.relative_to(state.parent)} ({m:04o})" for p, m in open_files[:_SHOWN])
        more = f" and {len(open_files) - _SHOWN} more" if len(open_files) > _SHOWN else ""
        problems.append(ConfigProblem(
            shown, "daemon.state_dir",
            f"{state} holds files others can read: {named}{more}: `chmod -R go= {state}`",
        ))
    return problems


def _reachable(folder: Path) -> bool:
    """Return whether group or other may search `folder` and every folder above it (raises `OSError`)."""
    return all(os.stat(f).st_mode & _SEARCH_BITS for f in (folder, *folder.parents))


def _open_entries(state: Path) -> Iterator[tuple[Path, int]]:
    """Yield (path, mode) for the state directory and what it holds with a group or other bit (links skipped)."""
    try:
        top = os.lstat(state)
        if not _reachable(state.parent):
            return
    except OSError:
        return  # not made yet: the daemon makes it 0700
    if stat.S_ISDIR(top.st_mode) and top.st_mode & _OPEN_BITS:
        yield state, stat.S_IMODE(top.st_mode)
    walked = 0
    for folder, dirs, files in os.walk(state):
        try:
            closed = not os.lstat(folder).st_mode & _SEARCH_BITS
        except OSError:
            closed = True  # gone meanwhile
        if closed:
            dirs.clear()  # nobody else may enter it: what it holds is out of their reach
            continue
        for name in (*dirs, *files):
            walked += 1
            if walked > _MAX_WALKED:
                return
            path = Path(folder) / name
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISLNK(mode) and mode & _OPEN_BITS:
                yield path, stat.S_IMODE(mode)
