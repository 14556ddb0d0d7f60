"""Metrics: one daemon's Prometheus registry, and the observers that feed it from turns, models and approvals."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest

from orchestrator.engine import ToolCallFinished, TurnEvent
from orchestrator.observability.classify import approval_outcome, provider_error_class, turn_channel, turn_outcome
from orchestrator.observability.collector import StateCollector
from orchestrator.observability.state import ObservedState
from orchestrator.observability.tally import Counts, Durations, KindCounts, TallyCollector
from orchestrator.policy import ApprovalDecision, ApprovalRequest, ApprovalRule, AuditSink
from orchestrator.providers import ModelBinding
from orchestrator.sessions import Turn
from orchestrator.store import UsageRow

__all__ = ["CONTENT_TYPE", "Metrics"]

# What the body is: `generate_latest` with its default `underscores` escaping writes the classic
# text format, every name a legacy one, which is 0.0.4. prometheus-client >= 0.22 labels it
# `version=1.0.0` (its CONTENT_TYPE_LATEST); every Prometheus, 2.x included, and the other
# scrapers read 0.0.4, so that is what is served, and what docs/gateway.md says.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

# Turns take seconds to minutes (a model, tools, an approval a person answers); model calls less.
_TURN_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_MODEL_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# What a tool name the model made up is counted as: its label must not grow without bound.
_UNKNOWN_TOOL: Final = "(unknown)"


class Metrics:
    """A registry of its own (never the process-global one), so two runtimes never share a series.

    The counters and histograms are plain tallies (`tally.py`) that `turn_hook`,
    `watch_completion`, `count_usage` and `audit` add to; they and the gauges of state (channels, MCP
    servers, inbox, session queues, read from `state`) become Prometheus families only when
    `exposition()` renders a scrape.
    """

    def __init__(self, state: ObservedState) -> None:
        self.turns = Counts(
            "orchestrator_turns", "Turns run, by agent, chat channel, path and why they ended.",
            ("agent", "channel", "path", "stop"),
        )
        self.turn_seconds = Durations(
            "orchestrator_turn_duration_seconds", "Turn latency: from its session being held to its result.",
            ("agent", "path"), _TURN_BUCKETS,
        )
        self.model_seconds = Durations(
            "orchestrator_model_request_duration_seconds",
            "One model request to one endpoint (each failover link its own), failed ones included.",
            ("provider", "model"), _MODEL_BUCKETS,
        )
        self.provider_errors = Counts(
            "orchestrator_provider_errors", "Failed model requests by provider and error class.", ("provider", "class"),
        )
        self.tool_calls = Counts(
            "orchestrator_tool_calls", "Tool calls the model made: `ran`, or `refused` (not run, whatever the reason).",
            ("agent", "tool", "outcome"),
        )
        self.approvals_asked = Counts("orchestrator_approvals_asked", "Approvals a person was asked for.", ("agent",))
        self.approvals = Counts(
            "orchestrator_approvals",
            "Approval decisions: granted, denied, timed_out, no_decision, policy_denied, no_operator.",
            ("agent", "outcome"),
        )
        self.tokens = KindCounts(
            "orchestrator_model_tokens",
            "Model tokens by agent, the answering provider and model, and kind: input (neither read from nor "
            "written to the prompt cache), output, cached_read, cache_write; the kinds add up to the total.",
            ("agent", "provider", "model"), ("input", "output", "cached_read", "cache_write"),
        )
        self.cost = Counts(
            "orchestrator_model_cost",
            "What model calls cost, in the currency of [providers.X.prices], by agent, provider and model "
            "(priced providers only).",
            ("agent", "provider", "model"),
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TallyCollector((
            self.turns, self.turn_seconds, self.model_seconds, self.provider_errors, self.tool_calls,
            self.approvals_asked, self.approvals, self.tokens, self.cost,
        )))
        self.registry.register(StateCollector(state))

    def exposition(self) -> bytes:
        """Return the registry in the Prometheus text format (`CONTENT_TYPE`), state gauges read now."""
        return generate_latest(self.registry)

    def turn_hook(self, turn: Turn) -> _TurnTimer:
        """Count one turn, its latency and its tool calls (a `TurnHook` for `Sessions.add_hook`)."""
        return _TurnTimer(self, turn)

    def watch_completion(self, binding: ModelBinding, model: str) -> _ModelTimer:
        """Time one model request and count its failure by class (a `CompletionWatcher`)."""
        return _ModelTimer(self, (binding.provider, model))

    def count_usage(self, row: UsageRow) -> None:
        """Count one recorded model call's tokens by kind, and its cost (a `UsageWatcher` for `UsageMeter.watch`)."""
        key = (row.agent, row.provider, row.model)
        cells = self.tokens.cells(key)
        cells[0] += max(0, row.input_tokens - row.cached_tokens - row.cache_write_tokens)
        cells[1] += row.output_tokens
        cells[2] += row.cached_tokens
        cells[3] += row.cache_write_tokens
        if row.cost is not None:
            self.cost.inc(key, row.cost)

    def audit(self, inner: AuditSink | None) -> AuditSink:
        """Return an audit sink that counts each approval decision, then records it in `inner`."""
        return _CountingAudit(self, inner)

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """Return the current value of one sample (`orchestrator_turns_total`, ...), for tests and benches."""
        return self.registry.get_sample_value(name, dict(labels or {}))


class _TurnTimer:
    """One turn's hook: a plain object rather than a generator (it is entered on every turn)."""

    __slots__ = ("_metrics", "_started", "_turn")

    def __init__(self, metrics: Metrics, turn: Turn) -> None:
        self._metrics, self._turn = metrics, turn
        self._started = 0.0
        turn.watch(_ToolCounter(metrics, turn))

    async def __aenter__(self) -> None:
        self._started = time.perf_counter()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        metrics, turn = self._metrics, self._turn
        path = turn.execution.identity.path.value if turn.execution is not None else "-"
        metrics.turn_seconds.observe((turn.agent, path), time.perf_counter() - self._started)
        metrics.turns.inc((turn.agent, turn_channel(turn), path, turn_outcome(turn, exc)))


class _ModelTimer:
    __slots__ = ("_key", "_metrics", "_started")

    def __init__(self, metrics: Metrics, key: tuple[str, str]) -> None:
        self._metrics, self._key = metrics, key
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        metrics = self._metrics
        metrics.model_seconds.observe(self._key, time.perf_counter() - self._started)
        if exc is not None and isinstance(exc, Exception):  # a cancelled request is nobody's error
            metrics.provider_errors.inc((self._key[0], provider_error_class(exc)))


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
        self._metrics.tool_calls.inc((self._turn.agent, tool, "ran" if event.ran else "refused"))


class _CountingAudit:
    __slots__ = ("_inner", "_metrics")

    def __init__(self, metrics: Metrics, inner: AuditSink | None) -> None:
        self._metrics, self._inner = metrics, inner

    def record_approval(self, request: ApprovalRequest, decision: ApprovalDecision, *, rule: ApprovalRule) -> None:
        metrics = self._metrics
        if decision.asked:
            metrics.approvals_asked.inc((request.agent,))
        metrics.approvals.inc((request.agent, approval_outcome(decision, rule)))
        if self._inner is not None:
            self._inner.record_approval(request, decision, rule=rule)
