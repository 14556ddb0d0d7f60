"""StateCollector: the gauges of daemon state (channels, MCP servers, inbox, session queues), read at scrape time.

Every label value comes from a bounded set: config names (channels, MCP servers, agents),
fixed kinds and states, fixed buckets; never a chat, sender, session or message id.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Final

from loguru import logger
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.metrics_core import Metric

from orchestrator.lifecycle import Lifecycle
from orchestrator.observability.state import ObservedState

__all__ = ["StateCollector"]

# (lowest length, label) of each bucket of the session queue distribution: a fixed set of labels.
_QUEUE_BUCKETS: Final = ((0, "0"), (1, "1"), (2, "2-4"), (5, "5-9"), (10, "10+"))
_QUEUE_LOWS: Final = tuple(low for low, _ in _QUEUE_BUCKETS)


class StateCollector(Collector):
    """Reads the daemon's state when scraped; nothing on a turn's path updates these gauges."""

    def __init__(self, state: ObservedState) -> None:
        self._state = state

    def describe(self) -> list[Metric]:
        """Return nothing: the families are only known at collection (a custom collector's contract)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield the channel, MCP, inbox and session-queue gauges as they are now."""
        state = self._state
        channels = GaugeMetricFamily(
            "orchestrator_channel_up", "1 while a channel is ready (connected and receiving), else 0.",
            labels=("channel", "kind"),
        )
        states = GaugeMetricFamily(
            "orchestrator_channel_state",
            "1 for the state each channel is in (connecting, ready, degraded, reconnecting, stopped), 0 for the others.",
            labels=("channel", "kind", "state"),
        )
        for name, status in sorted(state.channels.status().items()):
            channels.add_metric((name, status.kind), 1.0 if status.state is Lifecycle.READY else 0.0)
            for kind in Lifecycle:
                states.add_metric((name, status.kind, kind.value), 1.0 if status.state is kind else 0.0)
        yield channels
        yield states
        servers = GaugeMetricFamily(
            "orchestrator_mcp_server_state",
            "1 for the state each MCP connection is in (connecting, ready, degraded, reconnecting, stopped).",
            labels=("server", "agent", "state"),
        )
        pool = state.services.mcp
        for connection in pool.status() if pool is not None else ():
            for kind in Lifecycle:
                servers.add_metric(
                    (connection.server, connection.agent or "", kind.value), 1.0 if connection.lifecycle is kind else 0.0
                )
        yield servers
        try:
            depth: float = state.store.inbox_depth()
        except Exception as exc:  # a scrape reports what it can; a locked or closed store is logged
            logger.warning("metrics: the inbox depth could not be read: {}", exc)
            depth = float("nan")
        yield GaugeMetricFamily(
            "orchestrator_inbox_depth", "Messages stored and not finished (pending to queued).", value=depth
        )
        try:
            waiting: float = state.store.queued_replies()
        except Exception as exc:
            logger.warning("metrics: the delivery queue could not be read: {}", exc)
            waiting = float("nan")
        yield GaugeMetricFamily(
            "orchestrator_replies_queued", "Replies waiting in the delivery queue for the platform to take them.",
            value=waiting,
        )
        yield CounterMetricFamily(
            "orchestrator_replies_given_up", "Replies the delivery queue gave up after reply_give_up_s.",
            value=state.replies_given_up,
        )
        # Never a series per session: a session key names a chat and a sender (personal data,
        # and a label set that grows with every user); the distribution and the longest queue do.
        lengths = list(state.sessions.queue_lengths().values())
        yield GaugeMetricFamily(
            "orchestrator_session_queue_length_max",
            "The most turns waiting behind a running one in any session (0 with none waiting).",
            value=float(max(lengths, default=0)),
        )
        queues = GaugeMetricFamily(
            "orchestrator_sessions_by_queue_length",
            "Live sessions by how many turns wait behind the running one (waiting: 0, 1, 2-4, 5-9, 10+).",
            labels=("waiting",),
        )
        for label, count in _queue_buckets(lengths):
            queues.add_metric((label,), float(count))
        yield queues
        yield GaugeMetricFamily("orchestrator_sessions_live", "Sessions with a turn running or waiting.", value=len(lengths))


def _queue_buckets(lengths: Iterable[int]) -> list[tuple[str, int]]:
    """Return (bucket label, sessions in it) for every bucket of `_QUEUE_BUCKETS`, empty ones too."""
    counts = [0] * len(_QUEUE_BUCKETS)
    for length in lengths:
        counts[bisect.bisect_right(_QUEUE_LOWS, length) - 1] += 1
    return [(label, count) for (_, label), count in zip(_QUEUE_BUCKETS, counts, strict=True)]
