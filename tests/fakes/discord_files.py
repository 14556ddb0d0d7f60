"""FakeDiscord's files: attachments on a CDN route, and the multipart bodies of message posts.

Usage (through `FakeDiscord.cdn`)::

    obj = fake.cdn.attachment(channel_id=10, filename="photo.png", content=PNG, content_type="image/png")
    await fake.push_message(10, 42, "", attachments=[obj])
    fake.cdn.downloads; fake.cdn.served[-1].completed          # counted, and cut short or not
    fake.cdn.fail_next_download(status=500); fake.cdn.stall_next_download(5.0); fake.cdn.chunked = True
    fake.cdn.redirect_next_download("http://elsewhere/x"); fake.cdn.compress = True
    fake.created_messages[-1]["files"]                            # [UploadedFile(...)] of a post

The CDN, as Discord's: `GET /attachments/<channel>/<attachment>/<name>?ex=&is=&hm=`; the URL is
signed (`hm`), so a tampered or unknown one is 404 ("This content is no longer available.");
no credentials are needed. With `compress`, a file is sent gzip-encoded to a client that accepts
gzip (as a CDN compresses text), its Content-Length the compressed size. Message posts with files are `multipart/form-data` with a
`payload_json` part and `files[n]` parts; together the files may hold `MAX_UPLOAD_BYTES` (Discord's
default for a bot), past which the post is refused with 413 and code 40005.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import hmac
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Final

from aiohttp import web

__all__ = ["MAX_UPLOAD_BYTES", "FakeDiscordCdn", "ServedDownload", "UploadedFile", "parse_multipart"]

MAX_UPLOAD_BYTES: Final = 10 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_KEY: Final = b"fake-cdn-signing-key"
_ids = itertools.count(1_400_000_000_000_000_001)


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadedFile:
    """One `files[n]` part of a message post."""

    field: str
    filename: str | None
    content_type: str | None
    content: bytes


@dataclass(slots=True, kw_only=True)
class ServedDownload:
    """One CDN download: bytes sent, whether it reached the end, `finished` once the handler ended."""

    path: str
    sent: int = 0
    completed: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)


def parse_multipart(content_type: str, raw: bytes) -> tuple[Any, list[UploadedFile]]:
    """Split a multipart/form-data body into (the decoded `payload_json`, the file parts)."""
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    payload: Any = None
    files: list[UploadedFile] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        content = part.get_payload(decode=True)
        data = content if isinstance(content, bytes) else b""
        if name == "payload_json":
            payload = json.loads(data)
        elif isinstance(name, str):
            filename = part.get_filename()
            files.append(
                UploadedFile(field=name, filename=filename, content_type=part.get_content_type(), content=data)
            )
    return payload, files


class FakeDiscordCdn:
    """The CDN half of FakeDiscord; `origin()` is its `http://127.0.0.1:PORT`."""

    def __init__(self, *, origin: Callable[[], str], notify: Callable[[], Awaitable[None]]) -> None:
        self._origin = origin
        self._notify = notify
        self.chunked = False
        self.downloads = 0
        self.refused = 0
        self.served: list[ServedDownload] = []
        self._hosted: dict[str, tuple[bytes, str]] = {}  # path -> (bytes, content type)
        self.compress = False
        self.accept_encodings: list[str | None] = []  # the Accept-Encoding of each served download
        self._faults: deque[tuple[int, float, str | None]] = deque()  # (status, stall seconds, Location)

    def install(self, app: web.Application) -> None:
        """Add the CDN route to the fake's app."""
        app.router.add_get("/attachments/{channel}/{attachment}/{name}", self._download)

    def host(self, channel_id: str, filename: str, content: bytes, content_type: str) -> tuple[str, str]:
        """Store `content`; return (attachment id, signed URL)."""
        attachment_id = str(next(_ids))
        path = f"/attachments/{channel_id}/{attachment_id}/{filename}"
        self._hosted[path] = (content, content_type)
        expires = "7fffffff"
        return attachment_id, f"{self._origin()}{path}?ex={expires}&is=00000000&hm={_sign(path, expires)}&"

    def attachment(
        self,
        *,
        channel_id: int | str,
        filename: str,
        content: bytes,
        content_type: str | None,
        voice: bool = False,
        size: int | None = None,
    ) -> dict[str, Any]:
        """Host `content` and return the attachment object a MESSAGE_CREATE carries.

        `content_type=None` leaves the field out (Discord omits it when it cannot tell);
        `voice` adds `duration_secs` and `waveform`, as on a voice message.
        """
        attachment_id, url = self.host(str(channel_id), filename, content, content_type or "application/octet-stream")
        obj: dict[str, Any] = {
            "id": attachment_id,
            "filename": filename,
            "size": len(content) if size is None else size,
            "url": url,
            "proxy_url": url.replace("/attachments/", "/proxy/attachments/"),
        }
        if content_type is not None:
            obj["content_type"] = content_type
        if voice:
            obj |= {"duration_secs": 2.5, "waveform": "AAAA", "flags": 0}
        return obj

    def fail_next_download(self, *, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` downloads of a hosted file with `status`."""
        self._faults.extend([(status, 0.0, None)] * times)

    def stall_next_download(self, seconds: float, *, times: int = 1) -> None:
        """Send the headers of the next `times` downloads, then nothing for `seconds`."""
        self._faults.extend([(200, seconds, None)] * times)

    def redirect_next_download(self, location: str, *, status: int = 302) -> None:
        """Answer the next download of a hosted file with a redirect to `location`."""
        self._faults.append((status, 0.0, location))

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        hosted = self._hosted.get(path)
        expires = request.query.get("ex", "")
        if hosted is None or not hmac.compare_digest(request.query.get("hm", ""), _sign(path, expires)):
            self.refused += 1
            await self._notify()
            return web.Response(status=404, text="This content is no longer available.")
        self.downloads += 1
        status, stall_s, location = self._faults.popleft() if self._faults else (200, 0.0, None)
        if status != 200:
            await self._notify()
            headers = {"Location": location} if location is not None else {}
            return web.Response(status=status, text="fake CDN failure", headers=headers)
        content, content_type = hosted
        record = ServedDownload(path=path)
        self.served.append(record)
        accepted = request.headers.get("Accept-Encoding")
        self.accept_encodings.append(accepted)
        await self._notify()
        headers = {"Content-Type": content_type}
        if self.compress and "gzip" in (accepted or ""):
            content = gzip.compress(content)
            headers["Content-Encoding"] = "gzip"
        response = web.StreamResponse(headers=headers)
        if not self.chunked:
            response.content_length = len(content)
        await response.prepare(request)
        try:
            if stall_s:
                await asyncio.sleep(stall_s)
            for start in range(0, len(content), _CHUNK):
                piece = content[start : start + _CHUNK]
                await response.write(piece)
                record.sent += len(piece)
                await asyncio.sleep(0)
            await response.write_eof()
            record.completed = True
        finally:
            record.finished.set()
            await self._notify()
        return response


def _sign(path: str, expires: str) -> str:
    return hmac.new(_KEY, f"{path}:{expires}".encode(), hashlib.sha256).hexdigest()[:32]
