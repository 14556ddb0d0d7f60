"""Small real files for the media tests: a JPEG, a PNG, a one-page PDF with text, an OGG header, a costly PDF."""

from __future__ import annotations

import base64
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
