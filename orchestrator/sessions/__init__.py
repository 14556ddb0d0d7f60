"""Sessions: run one turn in a session (lock, transcript, engine, persist), for every caller.

Channel dispatch, the gateway, schedules, ACP, the library and `orchestrator agent` all run
their turns through `Sessions.run_turn`, and each SOP step through `Sessions.run_child`;
observers (metrics, traces, a typing indicator) attach there once as `TurnHook`s and see
every turn. Nothing else calls the engine but its own delegated turns (tests/test_turn_runner.py).
"""

from orchestrator.sessions.host import TurnHost
from orchestrator.sessions.runner import SessionState, Sessions, Turn, TurnHook, TurnRefused, TurnStopped
from orchestrator.sessions.transcripts import (
    HeldTranscript,
    MemoryTranscripts,
    StoredTranscripts,
    TranscriptSource,
)

__all__ = [
    "HeldTranscript",
    "MemoryTranscripts",
    "SessionState",
    "Sessions",
    "StoredTranscripts",
    "TranscriptSource",
    "Turn",
    "TurnHook",
    "TurnHost",
    "TurnRefused",
    "TurnStopped",
]
