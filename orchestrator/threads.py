"""The daemon's own bounded thread pool for blocking work (disk, parsing set-up, SQLite).

`asyncio.to_thread` runs on the loop's default executor, which is also where
`getaddrinfo` waits: a slow disk or a stuck parser filling it would leave every host-name
lookup (the provider's, the platforms') waiting behind it. Blocking work the daemon does
itself goes through `in_thread` instead, on a pool of its own with a fixed number of
workers; the default executor stays free for name resolution.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, ParamSpec, TypeVar

__all__ = ["BLOCKING_WORKERS", "in_thread"]

P = ParamSpec("P")
T = TypeVar("T")

# Enough for a handful of concurrent file operations and SQLite calls on a small host;
# work past it queues here, never in the default executor.
BLOCKING_WORKERS: Final = 8
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=BLOCKING_WORKERS, thread_name_prefix="orchestrator-blocking")
    return _pool


async def in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `func(*args, **kwargs)` on the daemon's blocking pool, with the caller's context."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)
