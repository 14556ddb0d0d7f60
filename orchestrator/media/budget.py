"""`ImageBudget`: how many bytes of encoded images the daemon's model requests hold at once.

A vision turn's request carries its pictures as base64 data URLs, and while the provider
call is in flight the process holds each one twice (the URL string in the messages and the
serialised JSON body the SDK sends). Fifty photos arriving together would hold all of that
at once; the budget makes later requests wait, with their pictures still on disk, until
earlier ones have returned. Waiting costs nothing when the budget is free: a request that
fits is admitted without suspending.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

__all__ = ["IMAGE_BUDGET_BYTES", "ImageBudget", "image_budget", "use_image_budget"]

# About 18 one-megabyte photos (or two at the default 10 MB `max_bytes`) in flight at once:
# the process then holds about 2x this for pictures (each URL and its request body), however
# many arrive together. bench/media.py: 32 MiB held 2.1-2.2x a 50-photo burst, 16 MiB 1.1-1.5x
# but made the burst a third slower behind a 0.5 s model. A message over the budget runs alone.
IMAGE_BUDGET_BYTES: Final = 24 * 1024 * 1024

_budgets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ImageBudget] = weakref.WeakKeyDictionary()


class ImageBudget:
    """A byte budget shared by every model request on one event loop, taken and given back by `hold`.

    Requests are admitted first come, first served: one that does not fit waits, and the
    ones behind it wait too, so a large request is never overtaken forever by small ones.
    A request larger than the whole budget is admitted when nothing else is held, and then
    runs alone. `held` is what is admitted now, `peak` the most ever admitted at once,
    `waited` how many requests had to wait.
    """

    __slots__ = ("_held", "_limit", "_waiters", "peak", "waited")

    def __init__(self, *, limit: int = IMAGE_BUDGET_BYTES) -> None:
        if limit < 1:
            raise ValueError(f"an image budget must be at least 1 byte, not {limit}")
        self._limit = limit
        self._held = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self.peak = 0
        self.waited = 0

    @property
    def limit(self) -> int:
        """Return the budget in bytes."""
        return self._limit

    @property
    def held(self) -> int:
        """Return the bytes admitted now."""
        return self._held

    @property
    def waiting(self) -> int:
        """Return how many requests are waiting for room."""
        return len(self._waiters)

    @asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes of the budget for the block, waiting for room first.

        The bytes are given back when the block ends however it ends (a failed provider
        call, cancellation). Cancelled while waiting, nothing is held and the request gives
        up its place in the queue.
        """
        if size <= 0:
            yield
            return
        await self._acquire(size)
        try:
            yield
        finally:
            self._release(size)

    def _fits(self, size: int) -> bool:
        return self._held == 0 or self._held + size <= self._limit

    async def _acquire(self, size: int) -> None:
        if not self._waiters and self._fits(size):
            self._take(size)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, granted)
        self._waiters.append(entry)
        self.waited += 1
        try:
            await granted
        except BaseException:
            if granted.done() and not granted.cancelled():  # admitted just as it was cancelled
                self._release(size)
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                self._admit()  # it may have blocked the head of the queue
            raise

    def _take(self, size: int) -> None:
        self._held += size
        self.peak = max(self.peak, self._held)

    def _release(self, size: int) -> None:
        self._held -= size
        self._admit()

    def _admit(self) -> None:
        while self._waiters:
            size, granted = self._waiters[0]
            if granted.done():  # cancelled: its waiter removes nothing else
                self._waiters.popleft()
                continue
            if not self._fits(size):
                return
            self._waiters.popleft()
            self._take(size)
            granted.set_result(None)


def image_budget() -> ImageBudget:
    """Return the running event loop's budget (the daemon's: it runs one loop), made on first use."""
    loop = asyncio.get_running_loop()
    budget = _budgets.get(loop)
    if budget is None:
        budget = _budgets[loop] = ImageBudget()
    return budget


def use_image_budget(budget: ImageBudget) -> None:
    """Make `budget` the running event loop's, for the requests admitted from now on."""
    _budgets[asyncio.get_running_loop()] = budget
