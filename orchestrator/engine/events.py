"""Turn events: what a surface may watch while a turn runs (tool calls, streamed reply text)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

__all__ = ["TextDelta", "ToolCallApproval", "ToolCallFinished", "ToolCallStarted", "TurnEvent", "TurnEvents"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """The engine took up one call the model made (before approval and the registry check)."""

    call_id: str
    tool: str
    arguments: str  # the JSON text exactly as the model sent it


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallApproval:
    """A person is asked to approve one call (`waiting`), or has just decided (not `waiting`).

    Between the two the call waits and does not run; a call no person is asked about (allowed,
    refused by policy, no operator) sends neither.
    """

    call_id: str
    tool: str
    waiting: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished:
    """One call is answered; `ran` is False when it was refused, denied or over budget unrun."""

    call_id: str
    tool: str
    ran: bool
    output: str  # what the model is told


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """The next piece of the model's answer text, as it streams (only when the turn streams).

    The pieces of one model answer concatenate to its text; an answer that calls tools may
    stream some text first.
    """

    text: str


TurnEvent: TypeAlias = ToolCallStarted | ToolCallApproval | ToolCallFinished | TextDelta
TurnEvents: TypeAlias = Callable[[TurnEvent], Awaitable[None]]
"""An observer of one turn; a failing observer is logged and never ends the turn."""
