"""Fetching an inbound attachment to disk, for every file adapter (Slack, Discord).

One download: the URL checked against the platform's own file hosts before any request (a
credential is only ever sent where the platform keeps its files), then one streaming loop
into the open file the core made that enforces the byte cap while reading, never after. The kind of a file is `channels.file_kinds`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO, Final

import aiohttp
from yarl import URL

from channels.base import AttachmentTooLarge, ChannelError, ChannelRefused

__all__ = ["CHUNK_BYTES", "FileHosts", "download_from"]

CHUNK_BYTES: Final = 64 * 1024
# Ask for the bytes as stored: a compressed answer's Content-Length is not the file's size.
_IDENTITY: Final = {"Accept-Encoding": "identity"}


@dataclass(frozen=True, slots=True, kw_only=True)
class FileHosts:
    """Where a platform keeps its files: the https `names`, and the origin (scheme, host, port)
    of the configured `api_base` (a self-hosted or loopback platform); `what` names them."""

    names: frozenset[str]
    api_base: str | None
    what: str

    def url(self, handle: str) -> URL | None:
        """Return `handle` as a URL if it is on one of these hosts, else None."""
        try:
            url = URL(handle)
        except ValueError:
            return None
        if not url.is_absolute():
            return None
        if url.scheme == "https" and url.host in self.names:
            return url
        if self.api_base is None:
            return None
        base = URL(self.api_base)
        return url if (url.scheme, url.host, url.port) == (base.scheme, base.host, base.port) else None


async def download_from(
    session: aiohttp.ClientSession,
    hosts: FileHosts,
    handle: str,
    dest: BinaryIO,
    *,
    channel: str,
    max_bytes: int,
    idle_timeout_s: float,
    headers: Mapping[str, str] | None = None,
    check: Callable[[aiohttp.ClientResponse], None] | None = None,
) -> int:
    """GET `handle` into the open file `dest` chunk by chunk and return the byte count.

    A URL not on `hosts` is `ChannelRefused` with no request made (so `headers`, a bearer
    token, only ever go to the platform's file hosts). Refuses before reading when the
    declared Content-Length passes `max_bytes`, and stops reading (closing the connection) as
    soon as more than `max_bytes` arrived: both raise `AttachmentTooLarge`. Redirects are not
    followed (a token must not travel on; a file host answering with a redirect did not accept
    the request). A 4xx is `ChannelRefused`; a 5xx, 429, network failure or `idle_timeout_s`
    without a byte is `ChannelError`. `check` sees the response first and may raise a clearer
    refusal (the platform's own ways of saying no). A host that compresses anyway is
    decompressed, the cap counting the file's own bytes. On any failure, cancellation
    included, the caller (which made `dest`) removes it.
    """
    url = hosts.url(handle)
    if url is None:
        raise ChannelRefused(channel, f"download: {handle[:100]!r} is not {hosts.what}")
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=idle_timeout_s, sock_read=idle_timeout_s)
    sent = {**_IDENTITY, **(headers or {})}
    try:
        async with session.get(url, headers=sent, allow_redirects=False, timeout=timeout) as response:
            if check is not None:
                check(response)
            _check_status(channel, response)
            encoded = response.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity")
            declared = None if encoded else response.content_length
            if declared is not None and declared > max_bytes:
                raise AttachmentTooLarge(channel, f"the file is {declared} bytes, over the cap of {max_bytes}")
            size = 0
            async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                size += len(chunk)
                if size > max_bytes:
                    response.close()  # stop the transfer now, not after the rest arrives
                    raise AttachmentTooLarge(channel, f"the file passed the cap of {max_bytes} bytes while downloading")
                dest.write(chunk)
            if declared is not None and size != declared:
                raise ChannelError(channel, f"download ended after {size} of {declared} bytes")
            return size
    except BaseException as exc:
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
        where = response.headers.get("Location", "")[:100]
        raise ChannelRefused(channel, f"download: the file host redirected (HTTP {status}) to {where!r}; not followed")
    reason = f"download: HTTP {status} {response.reason or ''}".rstrip()
    if 400 <= status < 500 and status != 429:
        raise ChannelRefused(channel, reason)
    raise ChannelError(channel, reason)
