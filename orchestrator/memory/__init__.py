"""Agent memory: a SQLite FTS5 store and the tools the seam binds to one agent's scope."""

from orchestrator.memory.store import MemoryRecord, MemoryStore
from orchestrator.memory.tools import (
    MAX_MEMORY_CHARS,
    MEMORY_FORGET_SPEC,
    MEMORY_RECALL_SPEC,
    MEMORY_STORE_SPEC,
    memory_tools,
)

__all__ = [
    "MAX_MEMORY_CHARS",
    "MEMORY_FORGET_SPEC",
    "MEMORY_RECALL_SPEC",
    "MEMORY_STORE_SPEC",
    "MemoryRecord",
    "MemoryStore",
    "memory_tools",
]
