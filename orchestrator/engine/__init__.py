"""The turn engine: the tool-call loop, transcripts and providers."""

from orchestrator.engine.loop import (
    StopReason,
    TurnObserver,
    TurnResult,
    add_turn_observer,
    run_tool_call_loop,
)
from orchestrator.engine.transcript import Transcript

__all__ = [
    "StopReason",
    "Transcript",
    "TurnObserver",
    "TurnResult",
    "add_turn_observer",
    "run_tool_call_loop",
]
