"""RateWindows: per-key sliding windows of message times (the counters behind `[[routes]] rate_limit`).

In memory, per process: a restart starts every window afresh (the limit is a courtesy to the
model and the other users, not a security boundary; budgets are the stored limits). The
shape is the one a shared store would keep: `hit` is one atomic check-and-count per key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

__all__ = ["RateVerdict", "RateWindows"]

# Keys whose windows emptied are dropped every this many hits (memory stays bounded by the active senders).
_SWEEP_EVERY: Final = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RateVerdict:
    """One message's fate: taken, or limited (`retry_in_s` until a slot frees; `notify` once per window)."""

    allowed: bool
    retry_in_s: float = 0.0
    notify: bool = False


class _Window:
    __slots__ = ("times", "quiet_until", "per_s")

    def __init__(self, per_s: float) -> None:
        self.per_s = per_s
        self.times: deque[float] = deque()
        self.quiet_until = 0.0  # the slow-down line was sent; no other until then


class RateWindows:
    """Sliding windows per key: `hit` counts a message if the window has room."""

    def __init__(self) -> None:
        self._windows: dict[Hashable, _Window] = {}
        self._hits = 0

    def hit(self, key: Hashable, *, now: float, messages: int, per_s: float) -> RateVerdict:
        """Count a message for `key` if fewer than `messages` were counted in the last `per_s` seconds.

        A limited message is not counted (the window frees as the counted ones age out), and
        only the first limited message until a slot frees gets `notify`.
        """
        self._hits += 1
        if self._hits % _SWEEP_EVERY == 0:
            self._sweep(now)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window(per_s)
        window.per_s = per_s  # a reload may change the limit
        times = window.times
        while times and times[0] <= now - per_s:
            times.popleft()
        if len(times) < messages:
            times.append(now)
            return RateVerdict(allowed=True)
        retry = times[0] + per_s - now
        notify = now >= window.quiet_until
        if notify:
            window.quiet_until = times[0] + per_s
        return RateVerdict(allowed=False, retry_in_s=retry, notify=notify)

    def __len__(self) -> int:
        return len(self._windows)

    def _sweep(self, now: float) -> None:
        # A window with nothing newer than its `per_s` and no slow-down pending holds nothing worth keeping.
        stale = [
            key for key, w in self._windows.items()
            if (not w.times or w.times[-1] <= now - w.per_s) and w.quiet_until <= now
        ]
        for key in stale:
            del self._windows[key]
