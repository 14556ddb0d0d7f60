"""Which mime types each attachment kind may carry, and the byte signatures images must have."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

__all__ = ["IMAGE_MIMES", "acceptable_mime", "looks_like", "policy_kind"]

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


def policy_kind(kind: str) -> str:
    """Return the `accept` entry that admits an attachment of `kind` (they are the same names)."""
    return kind


def acceptable_mime(kind: str, mime: str) -> bool:
    """Return whether `mime` is one the core can handle for `kind` (text/* is always a document)."""
    base = mime.split(";", 1)[0].strip().lower()
    if kind == "document" and base.startswith("text/"):
        return True
    if kind == "document" and base in IMAGE_MIMES:  # an image sent "as a file" is still a document
        return True
    return base in _MIMES.get(kind, frozenset())


def looks_like(mime: str, head: bytes) -> bool:
    """Return whether the first bytes of a file match the image type `mime` claims."""
    base = mime.split(";", 1)[0].strip().lower()
    if base == "image/webp":
        return head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    signatures = _SIGNATURES.get(base)
    return signatures is not None and any(head.startswith(s) for s in signatures)
