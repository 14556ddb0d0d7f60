"""python-telegram-bot's HTTP layer on aiohttp instead of httpx.

PTB documents `telegram.request.BaseRequest` as the place to plug in another HTTP client;
this is one on aiohttp, which the daemon already loads for Slack, Discord and the gateway.
Why not PTB's own `HTTPXRequest`: httpcore's connection pool re-scans every queued request
and every connection (with a costly `has_expired` probe each) whenever a request starts or
ends, so a few hundred replies waiting for a connection cost milliseconds of CPU each. Here
(`bench/channel_throughput.py`, 2 CPUs) 334 concurrent sends ran at 135-300 sends/s through
httpx against about 1,000/s through this class; aiohttp's connector queues waiters in a
deque. It also shares aiohttp's process-wide default SSL context instead of building one
(about 15 ms) per client.
"""

from __future__ import annotations

import asyncio
import re
from typing import BinaryIO, Final

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

__all__ = ["AiohttpRequest", "DownloadTooLarge", "stream_download"]

_DEFAULT_MEDIA_WRITE_TIMEOUT_S: Final = 20.0
_TOKEN_IN_PATH: Final = re.compile(r"/(?:file/)?bot[^/\s'\")]+/")
_CHUNK: Final = 64 * 1024


class DownloadTooLarge(Exception):
    """A download passed its byte cap while reading; `received` bytes had arrived."""

    def __init__(self, received: int, limit: int) -> None:
        self.received, self.limit = received, limit
        super().__init__(f"more than {limit} bytes (stopped at {received})")


class AiohttpRequest(BaseRequest):
    """A `BaseRequest` over one `aiohttp.ClientSession` with at most `connection_pool_size` connections.

    Timeouts mean what they mean for `HTTPXRequest`: `connect_timeout` bounds opening a
    connection, `pool_timeout` waiting for a free one, `read_timeout` each read of the answer
    (PTB lengthens it per call for long polls), `write_timeout` the whole upload.
    """

    __slots__ = ("_closed", "_connect_s", "_pool_s", "_read_s", "_session", "_size", "_write_s")

    def __init__(
        self,
        *,
        connection_pool_size: int,
        read_timeout: float | None,
        write_timeout: float | None,
        connect_timeout: float | None,
        pool_timeout: float | None,
    ) -> None:
        self._size = connection_pool_size
        self._read_s, self._write_s = read_timeout, write_timeout
        self._connect_s, self._pool_s = connect_timeout, pool_timeout
        self._session: aiohttp.ClientSession | None = None
        self._closed = False  # shut down by the adapter's close: never reopened behind its back

    @property
    def read_timeout(self) -> float | None:
        return self._read_s

    async def initialize(self) -> None:
        """Open the session (idempotent); `do_request` opens it on first use otherwise."""
        self._closed = False
        self._open()

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            # A request through a closed adapter (a turn holding it across a channel restart)
            # would open a session nobody closes: it fails instead, as a network error.
            raise NetworkError("the channel was closed")
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._size, limit_per_host=self._size)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self.USER_AGENT}, skip_auto_headers=("Accept-Encoding",)
            )
        return self._session

    async def shutdown(self) -> None:
        self._closed = True
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._open()  # it needs a running loop, so it is made on first use
        files = request_data.multipart_data if request_data is not None else None
        read = self._read_s if isinstance(read_timeout, DefaultValue) else read_timeout
        connect = self._connect_s if isinstance(connect_timeout, DefaultValue) else connect_timeout
        pool = self._pool_s if isinstance(pool_timeout, DefaultValue) else pool_timeout
        write = (
            (self._write_s if not files else _DEFAULT_MEDIA_WRITE_TIMEOUT_S)
            if isinstance(write_timeout, DefaultValue)
            else write_timeout
        )
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=_sum(pool, connect),  # aiohttp's `connect` covers waiting for the pool too
            sock_connect=connect,
            sock_read=read,
        )
        data: aiohttp.FormData | dict[str, str] | None = None
        if files:
            form = aiohttp.FormData()
            for name, value in (request_data.json_parameters if request_data is not None else {}).items():
                form.add_field(name, value)
            for name, (filename, content, mime) in files.items():
                form.add_field(name, content, filename=filename, content_type=mime)
            data = form
        elif request_data is not None:
            data = request_data.json_parameters
        try:
            async with asyncio.timeout(write if files and write is not None else None):
                response = await session.request(method, url, data=data, timeout=timeout, allow_redirects=False)
            async with response:
                return response.status, await response.read()
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise TimedOut from exc
        except Exception as exc:  # aiohttp's and yarl's texts may quote the URL, which holds the token
            raise NetworkError(f"{type(exc).__name__}: {_redact(str(exc))}") from None


async def stream_download(request: AiohttpRequest, url: str, dest: BinaryIO, *, max_bytes: int, timeout_s: float) -> int:
    """GET `url` into the open file `dest` chunk by chunk, never holding more than one chunk; return the size.

    Raises `DownloadTooLarge` as soon as more than `max_bytes` arrived, `NetworkError` (token
    redacted) for a failed transfer or a non-200 answer; the caller removes what was written.
    """
    session = request._open()
    received = 0
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False) as response:
            if response.status != 200:
                raise NetworkError(f"file download answered {response.status}")
            declared = response.content_length
            if declared is not None and declared > max_bytes:
                raise DownloadTooLarge(declared, max_bytes)
            async for chunk in response.content.iter_chunked(_CHUNK):
                received += len(chunk)
                if received > max_bytes:
                    raise DownloadTooLarge(received, max_bytes)
                dest.write(chunk)
        return received
    except BaseException as exc:
        if isinstance(exc, (DownloadTooLarge, NetworkError, asyncio.CancelledError)):
            raise
        if isinstance(exc, (TimeoutError, aiohttp.ServerTimeoutError)):
            raise TimedOut from exc
        if isinstance(exc, Exception):
            raise NetworkError(f"{type(exc).__name__}: {_redact(str(exc))}") from None
        raise


def _redact(text: str) -> str:
    return _TOKEN_IN_PATH.sub("/bot<token>/", text)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
