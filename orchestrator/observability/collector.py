"""StateCollector: the gauges of daemon state (channels, MCP servers, inbox, session queues), read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from loguru import logger
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.metrics_core import Metric

from orchestrator.mcp import ConnectionState
from orchestrator.observability.state import ObservedState

__all__ = ["StateCollector"]


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
            "orchestrator_channel_up", "1 while a channel is connected and receiving, else 0.",
            labels=("channel", "kind"),
        )
        for name, status in sorted(state.channels.status().items()):
            channels.add_metric((name, status.kind), 1.0 if status.ready else 0.0)
        yield channels
        servers = GaugeMetricFamily(
            "orchestrator_mcp_server_state",
            "1 for the state each MCP connection is in (connecting, ready, backoff, failed, closed).",
            labels=("server", "agent", "state"),
        )
        pool = state.services.mcp
        for connection in pool.status() if pool is not None else ():
            for kind in ConnectionState:
                servers.add_metric(
                    (connection.server, connection.agent or "", kind.value), 1.0 if connection.state is kind else 0.0
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
        queues = GaugeMetricFamily(
            "orchestrator_session_queue_length",
            "Turns waiting behind the one that holds each live session (only sessions in use appear).",
            labels=("session",),
        )
        lengths = state.sessions.queue_lengths()
        for key, waiting in sorted(lengths.items()):
            queues.add_metric((key,), float(waiting))
        yield queues
        yield GaugeMetricFamily("orchestrator_sessions_live", "Sessions with a turn running or waiting.", value=len(lengths))
