"""channels.image_size: the width and height of PNG, JPEG, GIF and WebP images from their headers alone."""

from __future__ import annotations

import struct

import pytest

from channels.image_size import pixel_size
from tests.media.samples import JPEG, PNG, jpeg_header, png


def _riff(chunk: bytes) -> bytes:
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def _vp8(width: int, height: int) -> bytes:  # lossy: a key frame's tag, start code, then 14-bit sizes
    frame = b"\x30\x01\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 10
    return _riff(b"VP8 " + struct.pack("<I", len(frame)) + frame)


def _vp8l(width: int, height: int) -> bytes:  # lossless: signature 0x2f, then width-1 and height-1 in 14 bits each
    bits = (width - 1) | ((height - 1) << 14)
    frame = b"\x2f" + struct.pack("<I", bits) + b"\x00" * 5
    return _riff(b"VP8L" + struct.pack("<I", len(frame)) + frame)


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (PNG, (1, 1)),
        (JPEG, (1, 1)),
        (png(1080, 25000), (1080, 25000)),
        (jpeg_header(4032, 3024), (4032, 3024)),
        (jpeg_header(300, 200).replace(b"\xff\xc0", b"\xff\xc2"), (300, 200)),  # progressive
        (jpeg_header(300, 200).replace(b"\xff\xe1", b"\xff\xff\xff\xe1"), (300, 200)),  # fill bytes before a marker
        (b"GIF87a" + struct.pack("<HH", 640, 480) + b"\x00" * 3, (640, 480)),
        (_vp8(1920, 1080), (1920, 1080)),
        (_vp8l(16383, 2), (16383, 2)),
    ],
)
def test_the_size_is_read_from_the_header(data: bytes, size: tuple[int, int]) -> None:
    assert pixel_size(data) == size


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not an image at all",
        PNG[:20],  # cut inside IHDR
        png(10, 10).replace(b"IHDR", b"IHDX"),
        png(0, 10),  # a zero side: no image Telegram could show
        jpeg_header(300, 200)[:-8],  # cut inside the frame header
        b"\xff\xd8\xff\xe0\x00\x00" + b"\x00" * 20,  # a segment length of 0 would never advance
        b"\xff\xd8\xff\xda\x00\x08" + b"\x00" * 20,  # the scan starts with no frame header before it
        b"\xff\xd8" + b"\xff\xfe\x00\x02" * 2000 + jpeg_header(10, 10)[2:],  # past the segment budget
        b"GIF89a\x01",
        _riff(b"VP8X\x0a\x00\x00\x00"),  # cut before the canvas size
    ],
)
def test_what_cannot_be_read_is_none(data: bytes) -> None:
    assert pixel_size(data) is None
