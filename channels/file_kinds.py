"""File kinds, in one place for the adapters and the core: a MIME type's attachment kind, what
the core can read, and the signatures images must start with.

The adapters report a kind (`kind_for_mime`); the core's intake (`orchestrator.media`) decides
what to accept (`acceptable_mime`, `looks_like`). Both read the same tables, so a file an
adapter calls a picture is one a vision model can be shown. It lives in `channels` because
the media intake imports channels, never the other way round (tests/test_layers.py).
"""

from __future__ import annotations

import mimetypes
from types import MappingProxyType
from typing import Final

from channels.base import AttachmentKind

__all__ = ["IMAGE_MIMES", "acceptable_mime", "guess_mime", "kind_for_mime", "looks_like"]

# What a vision model is shown. Other image/* types (HEIC, BMP, TIFF, SVG, icons) are documents:
# the core saves them as files, it does not show them.
IMAGE_MIMES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_AUDIO_MIMES: Final = frozenset({
    "audio/ogg", "audio/mpeg", "audio/mp3", "audio/mp4", "audio/m4a", "audio/x-m4a", "audio/aac",
    "audio/wav", "audio/x-wav", "audio/webm", "audio/flac", "audio/opus",
})
_VIDEO_MIMES: Final = frozenset({"video/mp4", "video/webm", "video/quicktime"})
_DOCUMENT_MIMES: Final = frozenset({
    "application/pdf", "application/json", "application/xml", "application/x-yaml", "application/yaml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
    "application/rtf", "application/zip",
})
_MIMES: Final = MappingProxyType({
    "image": IMAGE_MIMES,
    "voice": _AUDIO_MIMES,
    "audio": _AUDIO_MIMES,
    "video": _VIDEO_MIMES,
    "document": _DOCUMENT_MIMES,
})
# What a file must start with to be the image its mime type claims (a damaged or disguised
# upload is refused before it reaches the model).
_SIGNATURES: Final = MappingProxyType({
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
})
_GENERIC_MIME: Final = "application/octet-stream"


def _base(mime: str) -> str:
    return mime.split(";", 1)[0].strip().lower()


def guess_mime(reported: str | None, name: str | None) -> str:
    """Return the platform's MIME type (parameters dropped), or a guess from the file name."""
    if reported:
        mime = _base(reported)
        if mime:
            return mime
    guessed = mimetypes.guess_type(name or "", strict=False)[0]
    return guessed or _GENERIC_MIME


def kind_for_mime(mime: str, *, voice: bool = False) -> AttachmentKind:
    """Return the attachment kind for `mime`; `voice` marks the platform's own voice notes."""
    base = _base(mime)
    if base.startswith("audio/"):
        return "voice" if voice else "audio"
    if base in IMAGE_MIMES:
        return "image"
    if base.startswith("video/"):
        return "video"
    return "document"


def acceptable_mime(kind: str, mime: str) -> bool:
    """Return whether `mime` is one the core can handle for `kind` (text/* and image/* files are documents)."""
    base = _base(mime)
    if kind == "document" and base.startswith(("text/", "image/")):  # a picture sent "as a file" is kept as one
        return True
    return base in _MIMES.get(kind, frozenset())


def looks_like(mime: str, head: bytes) -> bool:
    """Return whether the first bytes of a file match the image type `mime` claims."""
    base = _base(mime)
    if base == "image/webp":
        return head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    signatures = _SIGNATURES.get(base)
    return signatures is not None and any(head.startswith(s) for s in signatures)
