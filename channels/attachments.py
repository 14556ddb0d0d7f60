"""Inbound attachments at the adapter boundary: what kind a file is, and fetching one to disk.

The file adapters (Slack, Discord) share these two pieces so they agree on both: a kind from the
MIME type (an adapter reports, the core decides what to accept), and one streaming download
loop that enforces the byte cap while reading, never after.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import aiohttp

from channels.base import AttachmentKind, AttachmentTooLarge, ChannelError, ChannelRefused

__all__ = ["CHUNK_BYTES", "guess_mime", "kind_for_mime", "stream_to_file"]

CHUNK_BYTES: Final = 64 * 1024
# Raster formats a vision model can be handed; other image/* types (SVG is XML, icons, RAW
# camera files) are documents: the core can still save them, it just cannot show them.
_PICTURES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/heic", "image/heif", "image/bmp", "image/tiff"}
)
_GENERIC_MIME: Final = "application/octet-stream"


def guess_mime(reported: str | None, name: str | None) -> str:
    """Return the platform's MIME type (parameters dropped), or a guess from the file name."""
    if reported:
        mime = reported.split(";", 1)[0].strip().lower()
        if mime:
            return mime
    guessed = mimetypes.guess_type(name or "", strict=False)[0]
    return guessed or _GENERIC_MIME


def kind_for_mime(mime: str, *, voice: bool = False) -> AttachmentKind:
    """Return the attachment kind for `mime`; `voice` marks the platform's own voice notes."""
    if mime.startswith("audio/"):
        return "voice" if voice else "audio"
    if mime in _PICTURES:
        return "image"
    if mime.startswith("video/"):
        return "video"
    return "document"


async def stream_to_file(
    session: aiohttp.ClientSession,
    url: str,
    dest: Path,
    *,
    channel: str,
    max_bytes: int,
    idle_timeout_s: float,
    headers: Mapping[str, str] | None = None,
    check: Callable[[aiohttp.ClientResponse], None] | None = None,
) -> int:
    """GET `url` into `dest` chunk by chunk and return the byte count.

    Refuses before reading when the declared Content-Length passes `max_bytes`, and stops
    reading (closing the connection) as soon as more than `max_bytes` arrived: both raise
    `AttachmentTooLarge`. Redirects are not followed (a bearer token must not travel on, and a
    file host answering with a redirect means the credentials were not accepted). A 4xx is
    `ChannelRefused`; a 5xx, 429, network failure or `idle_timeout_s` without a byte is
    `ChannelError`. `check` sees the response first and may raise a clearer refusal (the
    platform's own ways of saying no). On any failure, cancellation included, `dest` is removed.
    """
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=idle_timeout_s, sock_read=idle_timeout_s)
    try:
        async with session.get(url, headers=dict(headers or {}), allow_redirects=False, timeout=timeout) as response:
            if check is not None:
                check(response)
            _check_status(channel, response)
            declared = response.content_length
            if declared is not None and declared > max_bytes:
                raise AttachmentTooLarge(channel, f"the file is {declared} bytes, over the cap of {max_bytes}")
            size = 0
            with dest.open("wb") as out:
                async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes:
                        response.close()  # stop the transfer now, not after the rest arrives
                        raise AttachmentTooLarge(channel, f"the file passed the cap of {max_bytes} bytes while downloading")
                    out.write(chunk)
            if declared is not None and size != declared:
                raise ChannelError(channel, f"download ended after {size} of {declared} bytes")
            return size
    except BaseException as exc:
        dest.unlink(missing_ok=True)
        if isinstance(exc, ChannelError) or not isinstance(exc, Exception):
            raise  # ours already, or a cancellation
        if isinstance(exc, TimeoutError):
            raise ChannelError(channel, f"download stalled: no data for {idle_timeout_s:g}s") from exc
        if isinstance(exc, (aiohttp.ClientError, OSError)):
            raise ChannelError(channel, f"download failed: {type(exc).__name__}: {exc}") from exc
        raise


def _check_status(channel: str, response: aiohttp.ClientResponse) -> None:
    status = response.status
    if status == 200:
        return
    if 300 <= status < 400:
        raise ChannelRefused(channel, f"download: the file host redirected (HTTP {status}); the token was not accepted")
    reason = f"download: HTTP {status} {response.reason or ''}".rstrip()
    if 400 <= status < 500 and status != 429:
        raise ChannelRefused(channel, reason)
    raise ChannelError(channel, reason)
