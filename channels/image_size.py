"""The pixel size of a PNG, JPEG, GIF or WebP image, read from its header without decoding it.

A platform that shows pictures inline has rules on their size (Telegram's `sendPhoto`: width
plus height at most 10,000, the longer side at most 20 times the shorter); an adapter checks
them before it uploads. Only the fixed header fields are read, at offsets checked against the
length of the bytes (a JPEG's segments are walked by their lengths to its frame header, at most
`_MAX_JPEG_SEGMENTS` of them): nothing is decompressed, so an image that lies costs nothing.
What cannot be read is None (the caller sends the file as a file).
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["pixel_size"]

_PNG: Final = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); C4, C8 and CC are not frames.
_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE: Final = frozenset({0x01, *range(0xD0, 0xD9)})  # TEM, RSTn, SOI, EOI: no length
_MAX_JPEG_SEGMENTS: Final = 1000  # metadata segments before the frame; real files have a handful


def pixel_size(data: bytes) -> tuple[int, int] | None:
    """Return `(width, height)` of the image `data` holds, or None when it is none of the four or is cut short."""
    if data.startswith(_PNG):
        return _png(data)
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack_from("<HH", data, 6)
        return _positive(width, height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return None


def _png(data: bytes) -> tuple[int, int] | None:
    # The first chunk is IHDR: length (4), type (4), width (4), height (4), big-endian.
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack_from(">II", data, 16)
    return _positive(width, height)


def _jpeg(data: bytes) -> tuple[int, int] | None:
    at = 2
    for _ in range(_MAX_JPEG_SEGMENTS):
        while at < len(data) and data[at] == 0xFF:  # a marker, after any fill bytes
            at += 1
        if at >= len(data) or at < 3 or data[at - 1] != 0xFF:
            return None
        marker = data[at]
        at += 1
        if marker in _JPEG_STANDALONE:
            if marker == 0xD9:  # end of image before any frame
                return None
            continue
        if at + 2 > len(data):
            return None
        (length,) = struct.unpack_from(">H", data, at)
        if marker in _JPEG_FRAMES:
            # length (2), precision (1), height (2), width (2)
            if length < 7 or at + 7 > len(data):
                return None
            height, width = struct.unpack_from(">HH", data, at + 3)
            return _positive(width, height)
        if marker == 0xDA or length < 2:  # the scan starts before a frame header: not an image we can size
            return None
        at += length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    kind = data[12:16]
    if kind == b"VP8X" and len(data) >= 30:  # extended: canvas width-1 and height-1, 24 bits each
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _positive(width, height)
    if kind == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:  # lossless: 14 bits each, minus one
        bits = int.from_bytes(data[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if kind == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":  # lossy key frame
        width, height = struct.unpack_from("<HH", data, 26)
        return _positive(width & 0x3FFF, height & 0x3FFF)
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None
