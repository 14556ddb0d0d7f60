"""Sessions: run one turn in a session (lock, transcript, engine, persist), for every caller.

Channel dispatch, the gateway, schedules, ACP and the library all run their turns through
`Sessions.run_turn`; observers (a typing indicator, later streaming and usage) attach there
once as `TurnHook`s.
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
