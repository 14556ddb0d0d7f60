"""What the model receives for a transcript entry that references media: OpenAI content parts.

The transcript keeps only references (kind, mime, size, workspace path); the bytes are read
from the workspace when a message inside the history window is sent, so an image that has
left the window is never sent again, and history stays small.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = ["MEDIA_KEY", "ImageCache", "model_messages"]

# The transcript entry's key holding its references; never sent to a provider.
MEDIA_KEY: Final = "media"
_GONE: Final = "[an image that was attached here is no longer available]"

ImageCache = dict[str, str]


def model_messages(
    window: Sequence[dict[str, Any]],
    workspace: Path,
    *,
    vision: bool,
    detail: str,
    cache: ImageCache | None = None,
) -> list[dict[str, Any]]:
    """Return `window` as the provider must see it: media references removed, images as parts.

    Messages without references are passed through as they are (no copy). With `vision`,
    each referenced image becomes an `image_url` part holding a data URL, read from the
    workspace (and kept in `cache`, keyed by path, for the rest of the turn); a file that is
    gone is replaced by a short note.
    """
    if not any(MEDIA_KEY in message for message in window):
        return list(window)
    out: list[dict[str, Any]] = []
    for message in window:
        refs = message.get(MEDIA_KEY)
        if refs is None:
            out.append(message)
            continue
        plain = {k: v for k, v in message.items() if k != MEDIA_KEY}
        images = [ref for ref in refs if isinstance(ref, Mapping) and ref.get("kind") == "image"]
        if vision and images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": str(plain.get("content") or "")}]
            for ref in images:
                url = _data_url(workspace, ref, cache)
                if url is None:
                    parts.append({"type": "text", "text": _GONE})
                else:
                    parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
            plain["content"] = parts
        out.append(plain)
    return out


def _data_url(workspace: Path, ref: Mapping[str, Any], cache: ImageCache | None) -> str | None:
    relative = str(ref.get("path", ""))
    if cache is not None and relative in cache:
        return cache[relative]
    target = (workspace / relative).resolve()
    # the path was written by the intake, but a transcript is data: stay inside the jail
    if not relative or not target.is_relative_to(workspace) or not target.is_file():
        return None
    try:
        data = target.read_bytes()
    except OSError:
        return None
    url = f"data:{ref.get('mime', 'application/octet-stream')};base64,{base64.b64encode(data).decode('ascii')}"
    if cache is not None:
        cache[relative] = url
    return url
