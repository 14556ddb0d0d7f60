"""Observability: Prometheus metrics and OpenTelemetry traces of a running daemon.

`open_observability` attaches what the config enables through the seams that exist (the
turn runner's hooks, the turn's events, the provider pool's watchers, the audit sink);
it decides no policy. The gateway serves `Metrics.exposition()` on `GET /metrics`.
`prometheus_client` is imported only when metrics are on (`Metrics`, `CONTENT_TYPE` load
it on first use), the OpenTelemetry SDK only with `[telemetry]`: a daemon with neither
starts as fast as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.observability.heap import TRACEMALLOC_ENV, HeapTrace, HeapTraceSettingInvalid, heap_trace_from_env
from orchestrator.observability.state import ObservedState
from orchestrator.observability.tracing import TelemetryUnavailable, Tracing, require_telemetry
from orchestrator.observability.wiring import Observability, open_observability

if TYPE_CHECKING:
    from orchestrator.observability.metrics import CONTENT_TYPE, Metrics

__all__ = [
    "CONTENT_TYPE",
    "TRACEMALLOC_ENV",
    "HeapTrace",
    "HeapTraceSettingInvalid",
    "Metrics",
    "Observability",
    "ObservedState",
    "TelemetryUnavailable",
    "Tracing",
    "heap_trace_from_env",
    "open_observability",
    "require_telemetry",
]


def __getattr__(name: str) -> Any:
    if name in ("CONTENT_TYPE", "Metrics"):
        from orchestrator.observability import metrics

        return getattr(metrics, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
