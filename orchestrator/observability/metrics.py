"""Metrics: one daemon's Prometheus registry, and the observers that feed it from turns, models and approvals."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from orchestrator.engine import ToolCallFinished, TurnEvent
from orchestrator.observability.classify import approval_outcome, provider_error_class, turn_channel, turn_outcome
from orchestrator.observability.collector import ObservedState, StateCollector
from orchestrator.policy import ApprovalDecision, ApprovalRequest, ApprovalRule, AuditSink
from orchestrator.providers import ModelBinding
from orchestrator.sessions import Turn

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

# Turns take seconds to minutes (a model, tools, an approval a person answers); model calls less.
_TURN_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_MODEL_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# What a tool name the model made up is counted as: its label must not grow without bound.
_UNKNOWN_TOOL: Final = "(unknown)"


class Metrics:
    """A registry of its own (never the process-global one), so two runtimes never share a series.

    The counters and histograms are updated by `turn_hook`, `watch_completion` and `audit`; the
    gauges of state (channels, MCP servers, inbox, session queues) are read from `state` only
    when `exposition()` renders a scrape.
    """

    def __init__(self, state: ObservedState) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.turns = Counter(
            "orchestrator_turns", "Turns run, by agent, chat channel, path and why they ended.",
            ("agent", "channel", "path", "stop"), registry=registry,
        )
        self.turn_seconds = Histogram(
            "orchestrator_turn_duration_seconds", "Turn latency: from its session being held to its result.",
            ("agent", "path"), buckets=_TURN_BUCKETS, registry=registry,
        )
        self.model_seconds = Histogram(
            "orchestrator_model_request_duration_seconds",
            "One model request to one endpoint (each failover link its own), failed ones included.",
            ("provider", "model"), buckets=_MODEL_BUCKETS, registry=registry,
        )
        self.provider_errors = Counter(
            "orchestrator_provider_errors", "Failed model requests by provider and error class.",
            ("provider", "class"), registry=registry,
        )
        self.tool_calls = Counter(
            "orchestrator_tool_calls", "Tool calls the model made: `ran`, or `refused` (not run, whatever the reason).",
            ("agent", "tool", "outcome"), registry=registry,
        )
        self.approvals_asked = Counter(
            "orchestrator_approvals_asked", "Approvals a person was asked for.", ("agent",), registry=registry,
        )
        self.approvals = Counter(
            "orchestrator_approvals",
            "Approval decisions: granted, denied, timed_out, no_decision, policy_denied, no_operator.",
            ("agent", "outcome"), registry=registry,
        )
        registry.register(StateCollector(state))

    def exposition(self) -> bytes:
        """Return the registry in the Prometheus text format (`CONTENT_TYPE`), state gauges read now."""
        return generate_latest(self.registry)

    @asynccontextmanager
    async def turn_hook(self, turn: Turn) -> AsyncIterator[None]:
        """Count one turn, its latency and its tool calls (a `TurnHook` for `Sessions.add_hook`)."""
        started = time.perf_counter()
        turn.watch(_ToolCounter(self, turn))
        failure: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failure = exc
            raise
        finally:
            path = turn.execution.identity.path.value if turn.execution is not None else "-"
            self.turn_seconds.labels(turn.agent, path).observe(time.perf_counter() - started)
            self.turns.labels(turn.agent, turn_channel(turn), path, turn_outcome(turn, failure)).inc()

    def watch_completion(self, binding: ModelBinding, model: str) -> _ModelTimer:
        """Time one model request and count its failure by class (a `CompletionWatcher`)."""
        return _ModelTimer(self, binding.provider, model)

    def audit(self, inner: AuditSink | None) -> AuditSink:
        """Return an audit sink that counts each approval decision, then records it in `inner`."""
        return _CountingAudit(self, inner)

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """Return the current value of one sample (`orchestrator_turns_total`, ...), for tests and benches."""
        return self.registry.get_sample_value(name, dict(labels or {}))


class _ModelTimer:
    __slots__ = ("_metrics", "_model", "_provider", "_started")

    def __init__(self, metrics: Metrics, provider: str, model: str) -> None:
        self._metrics, self._provider, self._model = metrics, provider, model
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        metrics = self._metrics
        metrics.model_seconds.labels(self._provider, self._model).observe(time.perf_counter() - self._started)
        if exc is not None and isinstance(exc, Exception):  # a cancelled request is nobody's error
            metrics.provider_errors.labels(self._provider, provider_error_class(exc)).inc()


class _ToolCounter:
    """Counts one turn's finished tool calls; a name outside the agent's registry is `(unknown)`."""

    __slots__ = ("_metrics", "_turn")

    def __init__(self, metrics: Metrics, turn: Turn) -> None:
        self._metrics, self._turn = metrics, turn

    async def __call__(self, event: TurnEvent) -> None:
        if not isinstance(event, ToolCallFinished):
            return
        execution = self._turn.execution
        known = event.ran or (execution is not None and execution.tools.get(event.tool) is not None)
        tool = event.tool if known else _UNKNOWN_TOOL
        self._metrics.tool_calls.labels(self._turn.agent, tool, "ran" if event.ran else "refused").inc()


class _CountingAudit:
    __slots__ = ("_inner", "_metrics")

    def __init__(self, metrics: Metrics, inner: AuditSink | None) -> None:
        self._metrics, self._inner = metrics, inner

    def record_approval(self, request: ApprovalRequest, decision: ApprovalDecision, *, rule: ApprovalRule) -> None:
        metrics = self._metrics
        if decision.asked:
            metrics.approvals_asked.labels(request.agent).inc()
        metrics.approvals.labels(request.agent, approval_outcome(decision, rule)).inc()
        if self._inner is not None:
            self._inner.record_approval(request, decision, rule=rule)
