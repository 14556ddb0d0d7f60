"""Screen the client's stdin lines before the ACP library sees them.

The library takes each line as a JSON object: a line that is JSON but not an object (a
batch array, a bare number) would end the connection, a line that is not JSON is logged
with a traceback, and a notification it has no handler for is logged as an error. JSON-RPC
2.0 answers the first two with one error whose `id` is null (-32700 parse error, -32600
invalid request) and ignores the last. The screen does exactly that and keeps serving.

It also honours `$/cancel_request` for a running `session/prompt`: the prompt ends with
stop reason `cancelled`, as `session/cancel` would end it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from loguru import logger

__all__ = ["screen_input"]

# Notifications a client may send an agent that the library handles.
_KNOWN_NOTIFICATIONS: Final = frozenset({"session/cancel"})
_CANCEL_REQUEST: Final = "$/cancel_request"
_PARSE_ERROR: Final = {"code": -32700, "message": "Parse error"}
_INVALID_REQUEST: Final = {"code": -32600, "message": "Invalid Request"}

CancelSession = Callable[[str], Awaitable[None]]


def screen_input(
    source: asyncio.StreamReader, writer: asyncio.StreamWriter, *, cancel: CancelSession, limit: int
) -> tuple[asyncio.StreamReader, Callable[[], Coroutine[Any, Any, None]]]:
    """Return (the reader the library should use, the coroutine function that feeds it).

    Run the feeder for the whole connection; it ends (feeding EOF) when `source` does.
    """
    screened = asyncio.StreamReader(limit=limit)
    prompts: dict[Any, str] = {}  # request id of a running session/prompt -> its session id

    def answer(error: dict[str, Any]) -> None:
        writer.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() + b"\n")

    async def feed() -> None:
        try:
            while line := await source.readline():
                forward = await _screen(line, answer, prompts, cancel)
                if forward:
                    screened.feed_data(line)
        finally:
            screened.feed_eof()

    return screened, feed


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
