"""Screen the client's stdin lines before the ACP library sees them.

The library takes each line as a JSON object: a line that is JSON but not an object (a
batch array, a bare number) would end the connection, a line that is not JSON is logged
with a traceback, and a notification it has no handler for is logged as an error. JSON-RPC
2.0 answers the first two with one error whose `id` is null (-32700 parse error, -32600
invalid request) and ignores the last. The screen does exactly that and keeps serving.

It also honours `$/cancel_request` for a running `session/prompt`: the prompt ends with
stop reason `cancelled`, as `session/cancel` would end it.

A line longer than the limit (`line_limit`: the largest prompt the agent's media caps allow,
base64-encoded, plus headroom) is read to its end and dropped, never held whole, and answered
with one -32600 error naming the limit, with the request's id when the line's head shows it
(else null); the library would have ended the connection with a traceback instead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from loguru import logger

from orchestrator.media import MediaPolicy

__all__ = ["line_limit", "screen_input"]

# Notifications a client may send an agent that the library handles.
_KNOWN_NOTIFICATIONS: Final = frozenset({"session/cancel"})
_CANCEL_REQUEST: Final = "$/cancel_request"
_PARSE_ERROR: Final = {"code": -32700, "message": "Parse error"}
_INVALID_REQUEST: Final = {"code": -32600, "message": "Invalid Request"}

# A line of text and JSON around the attachments; also the least any agent takes (what a
# text-only agent took before the limit followed the media caps).
_HEADROOM: Final = 1 << 20
_FLOOR: Final = 16 << 20
_HEAD: Final = 4096  # how much of an oversized line is kept to find its request id in

CancelSession = Callable[[str], Awaitable[None]]


def line_limit(media: MediaPolicy) -> int:
    """Return the longest input line to take: the media caps' largest prompt in base64, plus headroom."""
    carried = 4 * -(-media.max_message_bytes // 3) if media.accept else 0
    return max(_FLOOR, carried + _HEADROOM)


def screen_input(
    source: asyncio.StreamReader, writer: asyncio.StreamWriter, *, cancel: CancelSession, limit: int
) -> tuple[asyncio.StreamReader, Callable[[], Coroutine[Any, Any, None]]]:
    """Return (the reader the library should use, the coroutine function that feeds it).

    Run the feeder for the whole connection; it ends (feeding EOF) when `source` does.
    """
    screened = asyncio.StreamReader(limit=limit)
    prompts: dict[Any, str] = {}  # request id of a running session/prompt -> its session id

    def answer(error: dict[str, Any], request: int | str | None = None) -> None:
        writer.write(json.dumps({"jsonrpc": "2.0", "id": request, "error": error}).encode() + b"\n")

    async def feed() -> None:
        try:
            while line := await _read_line(source):
                if isinstance(line, _Oversized):
                    logger.warning("acp: refused an input line of {:,} bytes (the limit is {:,})", line.size, limit)
                    answer(_too_large(line.size, limit), _request_id(line.head))
                    continue
                forward = await _screen(line, answer, prompts, cancel)
                if forward:
                    screened.feed_data(line)
        finally:
            screened.feed_eof()

    return screened, feed


@dataclass(frozen=True, slots=True, kw_only=True)
class _Oversized:
    """A line over the reader's limit: its first bytes and its whole length, the rest dropped."""

    head: bytes
    size: int


async def _read_line(source: asyncio.StreamReader) -> bytes | _Oversized:
    """Return the next line (b"" at EOF), or `_Oversized` for one past `source`'s limit, read to its end."""
    try:
        return await source.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        return exc.partial  # the last line had no newline
    except asyncio.LimitOverrunError as exc:
        head = await source.read(exc.consumed)  # all in the buffer already
    size = len(head)
    while True:  # drop the rest of the line, a buffer at a time
        try:
            size += len(await source.readuntil(b"\n"))
            break
        except asyncio.IncompleteReadError as exc:
            size += len(exc.partial)
            break
        except asyncio.LimitOverrunError as exc:
            size += len(await source.read(exc.consumed))
    return _Oversized(head=head[:_HEAD], size=size)


def _too_large(size: int, limit: int) -> dict[str, Any]:
    return {
        "code": _INVALID_REQUEST["code"],
        "message": f"Invalid Request: the message is {size:,} bytes; this agent takes at most {limit:,} bytes a line",
        "data": {"size": size, "limit": limit},
    }


def _request_id(head: bytes) -> int | str | None:
    """Return the top-level `id` of a JSON object whose start is `head`, when it comes before anything cut off."""
    text = head.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    try:
        at = _skip(text, 0)
        if text[at] != "{":
            return None
        at += 1
        while True:
            key, at = decoder.raw_decode(text, _skip(text, at))
            at = _skip(text, at)
            if not isinstance(key, str) or text[at] != ":":
                return None
            value, end = decoder.raw_decode(text, _skip(text, at + 1))
            if end >= len(text):  # the value may go on past the head (a number cut short)
                return None
            if key == "id":
                return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            at = _skip(text, end)
            if text[at] != ",":
                return None
            at += 1
    except (ValueError, IndexError):  # cut off before the id, or not JSON at all
        return None


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


async def _screen(
    line: bytes, answer: Callable[[dict[str, Any]], None], prompts: dict[Any, str], cancel: CancelSession
) -> bool:
    """Return whether the library should see `line`."""
    if not line.strip():
        return True
    try:
        message = json.loads(line)
    except ValueError:
        logger.debug("acp: a line that is not JSON; answered with a parse error")
        answer(_PARSE_ERROR)
        return False
    if not isinstance(message, dict):
        logger.debug("acp: a line that is JSON but not an object; answered as an invalid request")
        answer(_INVALID_REQUEST)
        return False
    method = message.get("method")
    if "id" in message and method == "session/prompt":
        params = message.get("params")
        request, session = message["id"], params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(request, (str, int)) and isinstance(session, str):
            for stale in [r for r, s in prompts.items() if s == session]:
                del prompts[stale]  # one prompt runs per session: the map stays as small as that
            prompts[request] = session
        return True
    if "id" in message and method is None:
        return True  # a response to one of our requests
    if "id" not in message and isinstance(method, str):
        if method == _CANCEL_REQUEST:
            params = message.get("params")
            request = params.get("requestId") if isinstance(params, dict) else None
            session = prompts.pop(request, None) if isinstance(request, (str, int)) else None
            if session is not None:
                await cancel(session)
            return False
        if method not in _KNOWN_NOTIFICATIONS:
            logger.debug("acp: ignoring the unknown notification {!r}", method)
            return False
    return True
