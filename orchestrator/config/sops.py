"""Config models for `[sops.<name>]`: standard operating procedures, ordered agent steps."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SopConfig", "SopStepConfig"]

NonEmptyStr = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class SopStepConfig(_Model):
    """`[[sops.<name>.steps]]`: one prompt run by one agent on its own child transcript."""

    prompt: NonEmptyStr
    # default: the SOP's agent
    agent: NonEmptyStr | None = None
    # narrows the step agent's tools (caller_allowed); absent = no narrowing, [] = no tools
    tools: tuple[NonEmptyStr, ...] | None = None
    requires_confirmation: bool = Field(default=False, strict=True)


class SopConfig(_Model):
    """`[sops.<name>]`: the default agent and the ordered steps."""

    agent: NonEmptyStr
    description: str = ""
    steps: tuple[SopStepConfig, ...] = Field(min_length=1)
