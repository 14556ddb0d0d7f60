"""ActionLedger: the runtime state behind `max_actions_per_hour` (one per daemon)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Final

__all__ = ["ActionLedger"]

_WINDOW_S: Final = 3600.0
_SWEEP_S: Final = 60.0  # how often keys whose last action left the window are dropped


class ActionLedger:
    """Count tool executions per key over a sliding hour.

    A key whose newest action is over an hour old holds nothing and is dropped (swept at
    most once a minute), so the ledger keeps the senders of the last hour, not every
    sender the daemon ever met.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._events: dict[str, deque[float]] = {}
        self._swept = clock()

    def size(self) -> int:
        """Return how many keys the ledger holds (those with an action in about the last hour)."""
        return len(self._events)

    def try_consume(self, key: str, limit: int) -> bool:
        """Record one action for `key` and return True, or return False when over `limit`."""
        now = self._clock()
        if now - self._swept >= _SWEEP_S:
            self._sweep(now)
        events = self._events.get(key)
        if events is None:
            events = self._events[key] = deque()
        while events and now - events[0] >= _WINDOW_S:
            events.popleft()
        if len(events) >= limit:
            return False
        events.append(now)
        return True

    def _sweep(self, now: float) -> None:
        self._swept = now
        for key in [k for k, events in self._events.items() if not events or now - events[-1] >= _WINDOW_S]:
            del self._events[key]
