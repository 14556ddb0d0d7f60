"""Config model for `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TelemetryConfig"]

NonEmptyStr = Annotated[str, Field(min_length=1)]


class TelemetryConfig(BaseModel):
    """Where the daemon sends its traces (turn, model and tool spans) and what it calls itself."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # "otlp_http": batches go to `endpoint`; "none": spans are made and dropped (a dry run)
    exporter: Literal["otlp_http", "none"] = "otlp_http"
    # the OTLP/HTTP traces URL of a collector
    endpoint: NonEmptyStr = "http://127.0.0.1:4318/v1/traces"
    service_name: NonEmptyStr = "orchestrator"
    # the share of turns traced, 0.0 to 1.0 (the model and tool spans follow their turn)
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0, strict=True)
    # how long the exporter waits for the collector per batch
    export_timeout_s: float = Field(default=10.0, gt=0, le=300, strict=True)
