"""Lifecycle: the one state value a channel or an MCP server is in, and where it came from.

`/health`, the metrics, the log lines and the status document all read this value (STYLE
rule 19); nothing reports readiness from a second flag of its own.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

__all__ = ["Lifecycle", "LifecycleRecord"]


class Lifecycle(enum.Enum):
    """Where a channel or an MCP server is in its life."""

    CONNECTING = "connecting"  # the first connect (or the first after a reload restarted it) is under way
    READY = "ready"  # connected, and the platform answers
    DEGRADED = "degraded"  # connected, but the platform fails requests (retried in place), or some connections are down
    RECONNECTING = "reconnecting"  # was ready (or tried), lost it, and retries with backoff
    STOPPED = "stopped"  # not running: stopped, shutting down, or refused for good (`last_error` says why)


@dataclass(slots=True, kw_only=True)
class LifecycleRecord:
    """One component's state, since when (wall-clock seconds) and the last error it saw."""

    state: Lifecycle = Lifecycle.CONNECTING
    since: float = 0.0
    last_error: str | None = None

    def __post_init__(self) -> None:
        if not self.since:
            self.since = time.time()

    def move(self, state: Lifecycle, error: str | None = None) -> Lifecycle | None:
        """Enter `state` (remembering `error` when given); return the state left, None when unchanged."""
        if error is not None:
            self.last_error = error
        if state is self.state:
            return None
        left, self.state, self.since = self.state, state, time.time()
        return left
