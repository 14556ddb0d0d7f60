"""One network step of the wizard, run to completion on its own event loop.

The wizard is a plain sequence of questions; each probe between them runs here, so Ctrl-C
while waiting on the network ends the wizard like Ctrl-C at a prompt (KeyboardInterrupt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import aiohttp

from orchestrator.doctor import ProbeRefused

__all__ = ["TIMEOUT_S", "online"]

T = TypeVar("T")
TIMEOUT_S: Final = 15.0


def online(call: Callable[[aiohttp.ClientSession], Awaitable[T]], *, timeout_s: float = TIMEOUT_S) -> T:
    """Run `call` with a fresh HTTP session; an unreachable platform is `ProbeRefused`."""

    async def run() -> T:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            return await call(session)

    try:
        return asyncio.run(run())
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        raise ProbeRefused(f"cannot connect ({str(exc) or type(exc).__name__})") from None
