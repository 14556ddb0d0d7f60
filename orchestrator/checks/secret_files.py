"""Every secret reference a config holds, and the `file:` ones a `git add` would commit.

A secret file inside a git work tree that git does not ignore is one `git add .` away from
the repository (and its history). `check` warns about each one; it is a warning, not an
error: the file may be ignored by a rule git only knows elsewhere, or the tree never pushed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from orchestrator.config import Config, SecretRef, dotted, secret_file

__all__ = ["secret_references", "tracked_secret_warnings"]

_GIT_TIMEOUT_S: Final = 5.0
_ADVICE: Final = "a `git add` would commit it: list it in a .gitignore (`orchestrator init` writes secrets/.gitignore)"

Location = tuple[int | str, ...]


def secret_references(config: Config) -> Iterator[tuple[Location, SecretRef]]:
    """Yield (where in the config, the reference) for every secret reference the config holds."""
    yield from _references(config, ())


def tracked_secret_warnings(config: Config, *, shown: str) -> list[str]:
    """Return one line per `file:` secret inside a git work tree that git does not ignore."""
    base = config.source.parent if config.source else None
    warnings: list[str] = []
    for loc, ref in secret_references(config):
        if ref.scheme != "file":
            continue
        path = secret_file(ref, base=base).absolute()
        tree = _work_tree(path)
        if tree is None:
            continue
        file = config.origin_of(str(loc[1])) if loc[:1] == ("agents",) else shown
        where = f"{file}: {dotted(loc)}: {ref!r} is inside the git work tree {tree}"
        verdict = _ignored(tree, path)
        if verdict is True:
            continue
        if verdict is None:
            warnings.append(f"{where}; git is not installed here, so whether it ignores the file was not checked")
        else:
            warnings.append(f"{where} and git does not ignore it: {_ADVICE}")
    return warnings


def _work_tree(path: Path) -> Path | None:
    """Return the nearest folder above `path` holding `.git` (a folder, or a worktree's file)."""
    for folder in path.parents:
        if (folder / ".git").exists():
            return folder
    return None


def _ignored(tree: Path, path: Path) -> bool | None:
    """Return whether git ignores `path` (a tracked file is not ignored); None without git.

    An answer git cannot give (not a repository after all, a timeout) counts as not ignored:
    the warning is the safe side.
    """
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(
            [git, "-C", str(tree), "check-ignore", "-q", "--", str(path)],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _references(value: Any, loc: Location) -> Iterator[tuple[Location, SecretRef]]:
    if isinstance(value, SecretRef):
        yield loc, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _references(getattr(value, name), (*loc, name))
    elif isinstance(value, dict):
        # `[mcp.servers.X] env` / `headers` take references as plain strings.
        plain = loc[-1:] in (("env",), ("headers",)) and loc[:2] == ("mcp", "servers")
        for key, item in value.items():
            if plain and isinstance(item, str) and item.partition(":")[0] in ("env", "file") and ":" in item:
                yield (*loc, key), SecretRef(item)
            else:
                yield from _references(item, (*loc, key))
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _references(item, (*loc, i))
