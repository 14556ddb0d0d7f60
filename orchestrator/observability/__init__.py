"""Observability: Prometheus metrics and OpenTelemetry traces of a running daemon.

`open_observability` attaches what the config enables through the seams that exist (the
turn runner's hooks, the turn's events, the provider pool's watchers, the audit sink);
it decides no policy. The gateway serves `Metrics.exposition()` on `GET /metrics`.
"""

from orchestrator.observability.collector import ObservedState
from orchestrator.observability.metrics import CONTENT_TYPE, Metrics
from orchestrator.observability.tracing import TelemetryUnavailable, Tracing, require_telemetry
from orchestrator.observability.wiring import Observability, open_observability

__all__ = [
    "CONTENT_TYPE",
    "Metrics",
    "Observability",
    "ObservedState",
    "TelemetryUnavailable",
    "Tracing",
    "open_observability",
    "require_telemetry",
]
