"""What the model receives for a transcript entry that references media: OpenAI content parts.

The transcript keeps only references (kind, mime, size, workspace path); the bytes are read
from the workspace when a message inside the history window is sent, so an image that has
left the window is never sent again, and history stays small.

The data URLs exist only while their request is in flight: `model_messages` measures the
window's images, holds their encoded size of the event loop's `ImageBudget`, encodes them,
and lets them go (and gives the budget back) when its block ends. Nothing is cached between
requests: re-encoding a megabyte costs about a millisecond, holding it through a turn's tool
calls would hold it outside the budget.
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final

from orchestrator.media.budget import ImageBudget, image_budget
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir

__all__ = ["MEDIA_KEY", "encoded_size", "model_messages"]

# The transcript entry's key holding its references; never sent to a provider.
MEDIA_KEY: Final = "media"
_GONE: Final = "[an image that was attached here is no longer available]"
# Read and encoded in pieces: a multiple of 3 bytes, so the pieces' base64 joins without padding.
_CHUNK: Final = 3 * 256 * 1024

# a referenced image found in the workspace: the file opened beneath the workspace (no link
# followed, one link, regular), its mime type and its size when measured
_Found = tuple[io.BufferedReader, str, int]


def encoded_size(mime: str, size: int) -> int:
    """Return the length of the data URL of a `size`-byte file of type `mime`."""
    return len(_prefix(mime)) + 4 * ((size + 2) // 3)


@asynccontextmanager
async def model_messages(
    window: Sequence[dict[str, Any]],
    workspace: Path,
    *,
    vision: bool,
    detail: str,
    budget: ImageBudget | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """Yield `window` as the provider must see it: media references removed, images as parts.

    Messages without references are passed through as they are (no copy). With `vision`,
    each referenced image becomes an `image_url` part holding a data URL read from the
    workspace; a file that is gone (or outside the workspace) is replaced by a short note.
    The images' encoded size is held of `budget` (default: the running loop's
    `image_budget()`) from before they are read until the block ends, so keep the provider
    call inside the block and the yielded list nowhere after it. Waiting for room happens
    before anything is read; cancellation while waiting or inside the block gives back
    what was held.
    """
    if not any(MEDIA_KEY in message for message in window):
        yield list(window)
        return
    with ExitStack() as opened:
        found = _find_images(window, workspace, opened) if vision else {}
        size = sum(encoded_size(where[1], where[2]) for where in found.values() if where is not None)
        async with (budget or image_budget()).hold(size):
            shown: list[dict[str, Any]] = []
            try:
                yield _with_parts(window, found, vision=vision, detail=detail, shown=shown)
            finally:
                # Whoever still holds the messages (an SDK's request object, a traceback) no longer
                # holds the pictures: what the budget gives back is really let go.
                for image in shown:
                    image["url"] = ""


def _find_images(window: Sequence[dict[str, Any]], workspace: Path, opened: ExitStack) -> dict[str, _Found | None]:
    found: dict[str, _Found | None] = {}
    try:
        root = opened.enter_context(WorkspaceDir.open(workspace))
    except OSError:
        root = None
    for message in window:
        for ref in _images(message):
            relative = str(ref.get("path", ""))
            if relative not in found:
                mime = str(ref.get("mime") or "application/octet-stream")
                found[relative] = None if root is None else _measure(root, relative, mime, opened)
    return found


def _measure(workspace: WorkspaceDir, relative: str, mime: str, opened: ExitStack) -> _Found | None:
    # the path was written by the intake, but a transcript is data and the workspace is the
    # agent's: opened beneath it, no link followed, a regular file with one link
    if not relative:
        return None
    try:
        handle = opened.enter_context(workspace.open_read(relative))
    except (OSError, UnsafeEntry):
        return None
    return handle, mime, os.fstat(handle.fileno()).st_size


def _with_parts(
    window: Sequence[dict[str, Any]],
    found: Mapping[str, _Found | None],
    *,
    vision: bool,
    detail: str,
    shown: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    urls: dict[str, str | None] = {}  # one string per file, however many parts show it
    out: list[dict[str, Any]] = []
    for message in window:
        if MEDIA_KEY not in message:
            out.append(message)
            continue
        plain = {k: v for k, v in message.items() if k != MEDIA_KEY}
        images = _images(message)
        if vision and images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": str(plain.get("content") or "")}]
            for ref in images:
                relative = str(ref.get("path", ""))
                if relative not in urls:
                    where = found.get(relative)
                    urls[relative] = None if where is None else _data_url(*where)
                url = urls[relative]
                if url is None:
                    parts.append({"type": "text", "text": _GONE})
                else:
                    image = {"url": url, "detail": detail}
                    shown.append(image)
                    parts.append({"type": "image_url", "image_url": image})
            plain["content"] = parts
        out.append(plain)
    return out


def _images(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = message.get(MEDIA_KEY) or ()
    return [ref for ref in refs if isinstance(ref, Mapping) and ref.get("kind") == "image"]


def _data_url(handle: io.BufferedReader, mime: str, size: int) -> str | None:
    # Encoded piece by piece from the file: the raw bytes of one piece at a time, never the
    # whole picture beside its base64. A file that grew since it was measured is not sent:
    # the budget holds what was measured.
    pieces = [_prefix(mime)]
    left = size
    try:
        handle.seek(0)
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            pieces.append(base64.b64encode(chunk).decode("ascii"))
            left -= len(chunk)
            if len(chunk) < _CHUNK:
                break
        if handle.read(1):
            return None
    except OSError:
        return None
    return "".join(pieces)


def _prefix(mime: str) -> str:
    return f"data:{mime};base64,"
