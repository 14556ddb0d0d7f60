"""Config models for `[[schedules]]`: an agent turn started by a clock, not a person."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_MISFIRE_GRACE_S", "DeliverTo", "ScheduleConfig"]

NonEmptyStr = Annotated[str, Field(min_length=1)]
DEFAULT_MISFIRE_GRACE_S = 300


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class DeliverTo(_Model):
    """`deliver_to = { channel = "...", chat = "..." }`: where a run's reply is sent."""

    channel: NonEmptyStr
    chat: NonEmptyStr


class ScheduleConfig(_Model):
    """`[[schedules]]`: run `prompt` as `agent` (or the SOP `sop`) on a crontab or an interval.

    Exactly one of `cron` and `interval_s`, and one of `prompt` (with `agent`) and `sop`
    (checked with the cross references, so the error names the key). `tools` narrows a
    prompt run (`caller_allowed`); absent = no narrowing.
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    agent: NonEmptyStr | None = None
    cron: NonEmptyStr | None = None
    timezone: NonEmptyStr | None = None
    interval_s: float | None = Field(default=None, gt=0, strict=True)
    prompt: NonEmptyStr | None = None
    sop: NonEmptyStr | None = None
    tools: tuple[NonEmptyStr, ...] | None = None
    deliver_to: DeliverTo | None = None
    misfire_grace_s: int = Field(default=DEFAULT_MISFIRE_GRACE_S, ge=1, strict=True)
