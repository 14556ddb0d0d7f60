"""open_observability(): attach the metrics and traces a config asks for to a running daemon, and detach them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.config import Config
from orchestrator.observability.state import ObservedState
from orchestrator.observability.tracing import Tracing, open_tracing

if TYPE_CHECKING:
    from orchestrator.observability.metrics import Metrics

__all__ = ["Observability", "open_observability"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Observability:
    """What is attached: the metrics (`[gateway] metrics = true`) and the tracing (`[telemetry]`)."""

    metrics: Metrics | None = None
    tracing: Tracing | None = None


@asynccontextmanager
async def open_observability(host: ObservedState, config: Config) -> AsyncIterator[Observability]:
    """Attach what `config` enables to `host`'s sessions, provider pool, usage meter and audit sink.

    Nothing is attached when neither is configured (the turns pay nothing). Call it before
    any turn is resolved: the audit sink is wrapped in `host.services`, which executions
    resolved from then on bind. Raises `TelemetryUnavailable` (nothing left attached) when
    `[telemetry]` is configured and the OpenTelemetry packages are missing. The settings
    are the ones at start: a reload does not change them.
    """
    async with AsyncExitStack() as stack:
        metrics = tracing = None
        if config.telemetry is not None:
            tracing = await stack.enter_async_context(open_tracing(config.telemetry))
            stack.callback(host.sessions.add_hook(tracing.turn_hook))
            stack.callback(host.services.providers.watch(tracing.watch_completion))
        if config.gateway is not None and config.gateway.metrics:
            from orchestrator.observability.metrics import Metrics  # prometheus_client only now

            metrics = Metrics(host)
            # The turn span is entered first, so the metrics' turn latency is inside it.
            stack.callback(host.sessions.add_hook(metrics.turn_hook))
            stack.callback(host.services.providers.watch(metrics.watch_completion))
            stack.callback(host.services.usage.watch(metrics.count_usage))  # tokens where usage is recorded
            services, plain = host.services, host.services.audit

            def unwrap() -> None:
                services.audit = plain

            services.audit = metrics.audit(plain)
            stack.callback(unwrap)
        yield Observability(metrics=metrics, tracing=tracing)
