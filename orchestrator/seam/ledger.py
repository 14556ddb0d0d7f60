"""ActionLedger: the runtime state behind `max_actions_per_hour` (one per daemon)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["ActionLedger"]

_WINDOW_S = 3600.0


class ActionLedger:
    """Count tool executions per key over a sliding hour."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._events: dict[str, deque[float]] = {}

    def try_consume(self, key: str, limit: int) -> bool:
        """Record one action for `key` and return True, or return False when over `limit`."""
        now = self._clock()
        events = self._events.get(key)
        if events is None:
            events = self._events[key] = deque()
        while events and now - events[0] >= _WINDOW_S:
            events.popleft()
        if len(events) >= limit:
            return False
        events.append(now)
        return True
