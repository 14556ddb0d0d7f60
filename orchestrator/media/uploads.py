"""Where attachments land: `uploads/<date>/<name>` inside the agent's workspace jail."""

from __future__ import annotations

import re
import secrets
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["UPLOADS_DIR", "safe_name", "upload_target"]

UPLOADS_DIR: Final = "uploads"
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
