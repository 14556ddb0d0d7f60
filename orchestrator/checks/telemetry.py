"""Whether the OpenTelemetry packages `[telemetry]` needs are installed here (an optional extra)."""

from __future__ import annotations

from typing import Final

from orchestrator.config import Config, TelemetryConfig
from orchestrator.errors import ConfigProblem

__all__ = ["TELEMETRY_INSTALL", "missing_telemetry_package", "telemetry_problems"]

TELEMETRY_INSTALL: Final = "pip install 'orchestrator[telemetry]'"


def missing_telemetry_package(settings: TelemetryConfig | None) -> str | None:
    """Return the distribution `settings` need that cannot be imported here, None when all can."""
    if settings is None:
        return None
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return "opentelemetry-sdk"
    if settings.exporter == "otlp_http":
        try:
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        except ImportError:
            return "opentelemetry-exporter-otlp-proto-http"
    return None


def telemetry_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem when `[telemetry]` is configured but its packages are not installed."""
    missing = missing_telemetry_package(config.telemetry)
    if missing is None:
        return []
    return [
        ConfigProblem(
            shown, "telemetry",
            f"configured, but the OpenTelemetry package {missing!r} is not installed, so the daemon "
            f"would refuse to start: {TELEMETRY_INSTALL} (or remove [telemetry])",
        )
    ]
