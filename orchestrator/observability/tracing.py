"""Tracing: OpenTelemetry spans for turns, model requests and tool calls (GenAI semantic conventions).

The `opentelemetry` packages are an optional extra (`pip install 'orchestrator[telemetry]'`);
they are imported only when `[telemetry]` is configured, and their absence then is one
`TelemetryUnavailable` at start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orchestrator.checks import TELEMETRY_INSTALL, missing_telemetry_package
from orchestrator.config import TelemetryConfig
from orchestrator.engine import ToolCallFinished, ToolCallStarted, TurnEvent
from orchestrator.errors import OrchestratorError
from orchestrator.observability.classify import provider_error_class, turn_channel, turn_outcome
from orchestrator.providers import Completion, ModelBinding
from orchestrator.sessions import Turn
from orchestrator.threads import in_thread

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = ["TelemetryUnavailable", "Tracing", "open_tracing", "require_telemetry"]



class TelemetryUnavailable(OrchestratorError):
    """`[telemetry]` is configured but the OpenTelemetry packages it needs are not installed."""

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(
            f"[telemetry] is configured but the OpenTelemetry package {missing!r} is not installed: "
            f"{TELEMETRY_INSTALL} (or remove [telemetry])"
        )


class Tracing:
    """One daemon's tracer provider and the observers that make its spans; only `open_tracing` builds it.

    A turn span (`invoke_agent <agent>`) is the current span while the engine runs, so the
    model spans (`chat <model>`) and tool spans (`execute_tool <tool>`) are its children.
    """

    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry import context, trace

        self.provider = provider
        self._tracer: Tracer = provider.get_tracer("orchestrator")
        self._context, self._trace = context, trace

    @asynccontextmanager
    async def turn_hook(self, turn: Turn) -> AsyncIterator[None]:
        """Hold a turn span open around the turn (a `TurnHook` for `Sessions.add_hook`)."""
        trace = self._trace
        execution = turn.execution
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": turn.agent,
            "gen_ai.conversation.id": turn.key,
            "orchestrator.channel": turn_channel(turn),
        }
        if execution is not None:
            attributes["orchestrator.path"] = execution.identity.path.value
            attributes["gen_ai.request.model"] = execution.model.model
            attributes["gen_ai.provider.name"] = execution.model.kind
        span = self._tracer.start_span(f"invoke_agent {turn.agent}", kind=trace.SpanKind.INTERNAL, attributes=attributes)
        # Entered and exited in the runner's task; the engine's task copies this context.
        token = self._context.attach(trace.set_span_in_context(span))
        turn.watch(_ToolSpans(self._tracer, trace))
        failure: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._context.detach(token)
            outcome = turn_outcome(turn, failure)
            span.set_attribute("orchestrator.stop_reason", outcome)
            result = turn.result
            if result is not None:
                span.set_attribute("orchestrator.tools_run", len(result.executed))
                if result.model is not None:
                    span.set_attribute("gen_ai.response.model", result.model)
                if result.incident is not None:
                    span.set_attribute("orchestrator.incident", result.incident)
            if failure is not None or outcome == "provider_error":
                span.set_attribute("error.type", type(failure).__name__ if failure is not None else outcome)
                span.set_status(trace.Status(trace.StatusCode.ERROR))
            span.end()

    def watch_completion(self, binding: ModelBinding, model: str) -> _ModelSpan:
        """Make one `chat <model>` span around one model request (a `CompletionWatcher`)."""
        return _ModelSpan(self._tracer, self._trace, binding, model)

    async def aclose(self) -> None:
        """Flush and stop the exporter (off the loop: it may wait for the collector)."""
        await in_thread(self.provider.shutdown)


class _ModelSpan:
    __slots__ = ("_binding", "_model", "_span", "_trace", "_tracer")

    def __init__(self, tracer: Tracer, trace: Any, binding: ModelBinding, model: str) -> None:
        self._tracer, self._trace, self._binding, self._model = tracer, trace, binding, model
        self._span: Span | None = None

    def __enter__(self) -> Callable[[Completion], None]:
        binding = self._binding
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": binding.kind,
            "gen_ai.request.model": self._model,
            "orchestrator.provider": binding.provider,
        }
        if binding.temperature is not None:
            attributes["gen_ai.request.temperature"] = binding.temperature
        url = urlsplit(binding.base_url)
        if url.hostname:
            attributes["server.address"] = url.hostname
            if url.port:
                attributes["server.port"] = url.port
        self._span = self._tracer.start_span(
            f"chat {self._model}", kind=self._trace.SpanKind.CLIENT, attributes=attributes
        )
        return self._answered

    def _answered(self, completion: Completion) -> None:
        """Record what the answer reports: its token usage, id, model and why it stopped."""
        span = self._span
        if span is None:
            return
        usage = completion.usage
        if usage is not None:  # input counts the cached part too, as the conventions ask
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if completion.response_id is not None:
            span.set_attribute("gen_ai.response.id", completion.response_id)
        if completion.response_model is not None:
            span.set_attribute("gen_ai.response.model", completion.response_model)
        if completion.finish_reason is not None:  # one choice is asked for: one reason
            span.set_attribute("gen_ai.response.finish_reasons", (completion.finish_reason,))

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        span = self._span
        if span is None:
            return
        if exc is not None:
            error = provider_error_class(exc) if isinstance(exc, Exception) else "cancelled"
            span.set_attribute("error.type", error)
            status = getattr(exc, "status", None)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()


class _ToolSpans:
    """Opens a span as each tool call starts and ends it when the call is answered."""

    __slots__ = ("_open", "_trace", "_tracer")

    def __init__(self, tracer: Tracer, trace: Any) -> None:
        self._tracer, self._trace = tracer, trace
        self._open: dict[str, Span] = {}

    async def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._open[event.call_id] = self._tracer.start_span(
                f"execute_tool {event.tool}",
                kind=self._trace.SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.tool,
                    "gen_ai.tool.call.id": event.call_id,
                    "gen_ai.tool.type": "function",
                },
            )
        elif isinstance(event, ToolCallFinished):
            span = self._open.pop(event.call_id, None)
            if span is None:
                return
            span.set_attribute("orchestrator.tool.ran", event.ran)
            if not event.ran:
                span.set_attribute("error.type", "refused")
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
            span.end()


def require_telemetry(settings: TelemetryConfig | None) -> None:
    """Raise `TelemetryUnavailable` when `settings` need OpenTelemetry packages that are not installed."""
    missing = missing_telemetry_package(settings)
    if missing is not None:
        raise TelemetryUnavailable(missing)


@asynccontextmanager
async def open_tracing(settings: TelemetryConfig) -> AsyncIterator[Tracing]:
    """Build the tracer provider `settings` describe; flush and shut it down on exit.

    Raises `TelemetryUnavailable` when the SDK (or, exporting, the OTLP/HTTP exporter)
    is not installed. The provider is the daemon's own: the process-global one is never set.
    """
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError:
        raise TelemetryUnavailable("opentelemetry-sdk") from None
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    if settings.exporter == "otlp_http":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TelemetryUnavailable("opentelemetry-exporter-otlp-proto-http") from None
        exporter = OTLPSpanExporter(endpoint=settings.endpoint, timeout=settings.export_timeout_s)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing = Tracing(provider)
    try:
        yield tracing
    finally:
        await tracing.aclose()
