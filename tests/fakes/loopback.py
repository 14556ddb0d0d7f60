"""Serving an aiohttp app on 127.0.0.1 at a free port: the start-up every fake and test server shares."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

__all__ = ["serving", "start_app"]


async def start_app(app: web.Application) -> tuple[web.AppRunner, int]:
    """Serve `app` on 127.0.0.1 at a free port; return its runner (`cleanup()` stops it) and the port.

    A handler whose client hung up is cancelled (a dropped long poll or a timed-out request
    ends at once), and stopping waits at most 0.5 s for the rest.
    """
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` for the block; yield its `http://127.0.0.1:<port>` origin."""
    runner, port = await start_app(app)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
