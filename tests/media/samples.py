"""Small real files for the media tests: a JPEG, a PNG, a one-page PDF with text, an OGG header, a costly PDF."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Final

# A 1x1 white JPEG (baseline, JFIF).
JPEG: Final = base64.b64decode(
    "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/"
    "wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8AKp//2Q=="
)
# A 1x1 transparent PNG.
PNG: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def png(width: int, height: int) -> bytes:
    """Return a real white PNG of `width` x `height` (1-bit grey: a 1080x25000 screenshot is a few kB)."""
    row = b"\x00" + b"\xff" * ((width + 7) // 8)  # filter byte "none", then the pixels

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * height, 9)) + chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    """Return the head of a baseline JPEG of `width` x `height`: SOI, a JFIF APP0, an EXIF-sized APP1, the frame."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 3000) + b"Exif\x00\x00" + b"\x00" * 2994
    frame = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + app1 + frame + b"\xff\xd9"


OGG: Final = b"OggS\x00\x02" + b"\x00" * 58 + b"voice"
PDF_TEXT: Final = "Quarterly revenue grew twelve percent"


def _pdf(text: str) -> bytes:
    stream = f"BT /F1 18 Tf 40 700 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _assembled(objects)


def _assembled(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


PDF: Final = _pdf(PDF_TEXT)


def jpeg_of_size(size: int) -> bytes:
    """Return a JPEG-signed payload of exactly `size` bytes (for caps and benches)."""
    return (JPEG[:-2] + b"\x00" * max(0, size - len(JPEG)) + JPEG[-2:])[:size] if size >= len(JPEG) else JPEG


def costly_pdf(*, pages: int = 500, stream_bytes: int = 2_000_000) -> bytes:
    """Return a small PDF whose pages all draw one big shared stream of text operators that show nothing.

    About 4 KB; pypdf spends a fraction of a CPU-second per page on it (minutes for the file)
    and the text cut never triggers: the hostile upload of issue 24.
    """
    stream = zlib.compress(b"BT ET\n" * (stream_bytes // 6), 9)
    kids = " ".join(f"{4 + page} 0 R" for page in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
        b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
    ] * pages
    return _assembled(objects)


def greedy_pdf(*, text_bytes: int = 60_000_000) -> bytes:
    """Return a PDF of about 60 KB whose one page shows a 60 MB string: its parse needs far more than 128 MiB."""
    body = b"BT /F1 9 Tf 9 9 Td (" + b"a" * text_bytes + b") Tj ET"
    stream = zlib.compress(body, 9)
    return _assembled([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
        b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>",
    ])
