"""Where attachments land: `uploads/<date>/<name>` inside the agent's workspace jail."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["LEFTOVER_AGE_S", "UPLOADS_DIR", "safe_name", "sweep_leftovers", "upload_target"]

UPLOADS_DIR: Final = "uploads"
# A fetch or a gateway upload that was killed (kill -9, power loss) leaves its hidden
# `.partial-*` file or `.incoming-*` folder behind; one older than this cannot be in flight
# (fetches and uploads time out after a minute), so the first intake of a workspace in a
# process removes it.
LEFTOVER_AGE_S: Final = 3600.0
_SWEPT: set[Path] = set()
_MAX_NAME: Final = 120
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._ -]+")
_EXTENSIONS: Final = {
    "image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp",
    "application/pdf": ".pdf", "audio/ogg": ".ogg", "audio/mpeg": ".mp3", "video/mp4": ".mp4",
}


def safe_name(name: str | None, *, kind: str, mime: str) -> str:
    """Return `name` reduced to a plain file name: no directories, no dot files, no odd characters."""
    raw = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", raw).strip(" .")
    if not cleaned or set(cleaned) <= {"_", "."}:
        cleaned = f"{kind}{_EXTENSIONS.get(mime.split(';')[0].strip().lower(), '')}"
    if len(cleaned) > _MAX_NAME:
        stem, dot, ext = cleaned.rpartition(".")
        cleaned = (stem[: _MAX_NAME - len(ext) - 1] + "." + ext) if dot and len(ext) <= 10 else cleaned[:_MAX_NAME]
    return cleaned


def upload_target(security: SecurityPolicy, name: str, *, today: date | None = None) -> tuple[str, Path]:
    """Return a fresh workspace-relative path for `name` under today's uploads folder, and its real path.

    The folder is created; an existing file of that name is never overwritten (a short
    random suffix is added). Raises `WorkspaceEscape` if the jail would be left.
    """
    day = (today or date.today()).isoformat()
    folder = f"{UPLOADS_DIR}/{day}"
    security.confine(folder).mkdir(parents=True, exist_ok=True)
    relative = f"{folder}/{name}"
    target = security.confine(relative)
    if target.exists():
        stem, dot, ext = name.rpartition(".")
        unique = f"{stem}-{secrets.token_hex(3)}.{ext}" if dot and stem else f"{name}-{secrets.token_hex(3)}"
        relative = f"{folder}/{unique}"
        target = security.confine(relative)
    return relative, target


def sweep_leftovers(workspace: Path, *, now: float | None = None) -> int:
    """Remove what killed fetches left under `workspace/uploads`, once per workspace per process.

    Only hidden `.partial-*` files (in `uploads/<date>/`) and `.incoming-*` folders (in
    `uploads/`) older than `LEFTOVER_AGE_S`, never following a symbolic link; return how many
    were removed. What cannot be removed stays, for the next process to try.
    """
    if workspace in _SWEPT:
        return 0
    _SWEPT.add(workspace)
    cutoff = (time.time() if now is None else now) - LEFTOVER_AGE_S
    removed = 0
    for entry, is_folder in _leftovers(workspace / UPLOADS_DIR):
        try:
            if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                continue
            if is_folder:
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed += 1
    return removed


def _leftovers(uploads: Path) -> list[tuple[os.DirEntry[str], bool]]:
    found: list[tuple[os.DirEntry[str], bool]] = []
    try:
        with os.scandir(uploads) as days:
            for day in days:
                if day.name.startswith(".incoming-") and day.is_dir(follow_symlinks=False):
                    found.append((day, True))
                elif not day.name.startswith(".") and day.is_dir(follow_symlinks=False):
                    with os.scandir(day.path) as files:
                        found.extend(
                            (file, False) for file in files
                            if file.name.startswith(".partial-") and file.is_file(follow_symlinks=False)
                        )
    except OSError:
        pass  # no uploads yet, or unreadable: nothing to sweep
    return found
