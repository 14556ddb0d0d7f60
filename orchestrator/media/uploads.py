"""Where attachments land: `uploads/<date>/<name>` inside the agent's workspace, made and swept beneath its descriptor."""

from __future__ import annotations

import re
import secrets
import time
from datetime import date
from pathlib import Path
from typing import Final

from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir

__all__ = ["EXTRACT_SUFFIX", "LEFTOVER_AGE_S", "UPLOADS_DIR", "safe_name", "sweep_leftovers", "upload_target"]

UPLOADS_DIR: Final = "uploads"
EXTRACT_SUFFIX: Final = ".txt"  # a PDF's extracted text is `<name>.txt` beside it
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


def upload_target(workspace: WorkspaceDir, name: str, *, today: date | None = None) -> str:
    """Return a fresh workspace-relative path for `name` under today's uploads folder, creating the folder.

    The folders are made beneath the workspace's descriptor (a link on the way is
    `UnsafeEntry`); a name already taken, or whose `.txt` extract name is (a PDF's text goes
    beside it), gets a short random suffix, so nothing there is ever written over.
    """
    folder = f"{UPLOADS_DIR}/{(today or date.today()).isoformat()}"
    workspace.make_dirs(folder)
    relative = f"{folder}/{name}"
    while workspace.exists(relative) or workspace.exists(relative + EXTRACT_SUFFIX):
        stem, dot, ext = name.rpartition(".")
        unique = f"{stem}-{secrets.token_hex(3)}.{ext}" if dot and stem else f"{name}-{secrets.token_hex(3)}"
        relative = f"{folder}/{unique}"
    return relative


def sweep_leftovers(root: Path, *, now: float | None = None) -> int:
    """Remove what killed fetches left under `root/uploads`, once per workspace per process.

    Only hidden `.partial-*` files (in `uploads/<date>/`) and `.incoming-*` folders (in
    `uploads/`) older than `LEFTOVER_AGE_S`, listed and removed beneath the workspace's
    descriptor: a link is never followed (a linked day folder is not entered, a link named
    like a leftover is not a leftover). Return how many were removed; what cannot be removed
    stays, for the next process to try.
    """
    if root in _SWEPT:
        return 0
    _SWEPT.add(root)
    cutoff = (time.time() if now is None else now) - LEFTOVER_AGE_S
    removed = 0
    try:
        workspace = WorkspaceDir.open(root)
    except OSError:
        return 0
    with workspace:
        for relative, is_folder in _leftovers(workspace, cutoff):
            try:
                if is_folder:
                    workspace.remove_tree(relative)
                else:
                    workspace.delete(relative)
            except (OSError, UnsafeEntry):
                continue
            removed += 1
    return removed


def _leftovers(workspace: WorkspaceDir, cutoff: float) -> list[tuple[str, bool]]:
    found: list[tuple[str, bool]] = []
    try:
        for day in workspace.entries(UPLOADS_DIR):
            if day.kind != "dir":
                continue  # a link or a file: never entered, never removed
            if day.name.startswith(".incoming-"):
                if day.mtime < cutoff:
                    found.append((f"{UPLOADS_DIR}/{day.name}", True))
            elif not day.name.startswith("."):
                found.extend(
                    (f"{UPLOADS_DIR}/{day.name}/{file.name}", False)
                    for file in workspace.entries(f"{UPLOADS_DIR}/{day.name}")
                    if file.kind == "file" and file.name.startswith(".partial-") and file.mtime < cutoff
                )
    except (OSError, UnsafeEntry):
        pass  # no uploads yet, unreadable, or `uploads` is a link: nothing to sweep
    return found
