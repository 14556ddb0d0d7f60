"""The turn engine: the tool-call loop, transcripts and providers."""

from orchestrator.engine.events import (
    TextDelta,
    ToolCallApproval,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnEvents,
)
from orchestrator.engine.loop import (
    StopReason,
    TurnObserver,
    TurnResult,
    add_turn_observer,
    run_tool_call_loop,
)
from orchestrator.engine.context import compact_now
from orchestrator.engine.tokens import TurnUsage
from orchestrator.engine.transcript import Summary, Transcript
from orchestrator.engine.turn_log import log_turn

__all__ = [
    "StopReason",
    "Summary",
    "TextDelta",
    "ToolCallApproval",
    "ToolCallFinished",
    "ToolCallStarted",
    "Transcript",
    "TurnEvent",
    "TurnEvents",
    "TurnObserver",
    "TurnResult",
    "TurnUsage",
    "add_turn_observer",
    "compact_now",
    "log_turn",
    "run_tool_call_loop",
]
