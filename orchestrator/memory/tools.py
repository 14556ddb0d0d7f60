"""The memory tools, each bound to one store, one writing agent and the agents it may read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from orchestrator.errors import ToolFailure
from orchestrator.memory.store import MemoryRecord, MemoryStore
from orchestrator.tools import MEMORY_FORGET_NAME, MEMORY_RECALL_NAME, MEMORY_STORE_NAME, Tool, ToolSource, ToolSpec

__all__ = [
    "MEMORY_FORGET_SPEC",
    "MEMORY_RECALL_SPEC",
    "MEMORY_STORE_SPEC",
    "MAX_MEMORY_CHARS",
    "memory_tools",
]

MAX_MEMORY_CHARS: Final = 8000
_MAX_TAGS: Final = 16
_MAX_TAG_CHARS: Final = 64
_DEFAULT_LIMIT: Final = 5
_MAX_LIMIT: Final = 50

MEMORY_STORE_SPEC: Final = ToolSpec(
    name=MEMORY_STORE_NAME,
    description=(
        "Remember a fact for later turns and sessions. Returns the memory's id "
        "(use it with memory_forget)."
    ),
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_MEMORY_CHARS,
                         "description": "What to remember, self-contained."},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": _MAX_TAGS,
                         "description": "Optional keywords that help recall it."},
            },
            "required": ["text"],
            "additionalProperties": False,
        }
    ),
    read_only=False,
    source=ToolSource.MEMORY,
)
MEMORY_RECALL_SPEC: Final = ToolSpec(
    name=MEMORY_RECALL_NAME,
    description=(
        "Search remembered facts by keywords; returns the best matches first, each with "
        "its id and the agent that wrote it."
    ),
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Keywords to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT,
                          "description": f"How many matches at most (default {_DEFAULT_LIMIT})."},
            },
            "required": ["query"],
            "additionalProperties": False,
        }
    ),
    read_only=True,
    # Memories may quote outside content (a fetched page, another agent's notes).
    untrusted_output=True,
    source=ToolSource.MEMORY,
)
MEMORY_FORGET_SPEC: Final = ToolSpec(
    name=MEMORY_FORGET_NAME,
    description="Delete one of your own memories by its id.",
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": {"id": {"type": "integer", "description": "The memory's id."}},
            "required": ["id"],
            "additionalProperties": False,
        }
    ),
    read_only=False,
    source=ToolSource.MEMORY,
)




def memory_tools(store: MemoryStore, *, agent: str, read_from: tuple[str, ...]) -> dict[str, Tool]:
    """Return the three memory tools writing as `agent` and reading `agent` plus `read_from`."""
    readable = tuple(dict.fromkeys((agent, *read_from)))
    return {
        MEMORY_STORE_SPEC.name: MemoryStoreTool(store=store, agent=agent),
        MEMORY_RECALL_SPEC.name: MemoryRecallTool(store=store, agents=readable),
        MEMORY_FORGET_SPEC.name: MemoryForgetTool(store=store, agent=agent),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStoreTool:
    """`memory_store`: every write is stamped with the bound agent."""

    store: MemoryStore
    agent: str

    @property
    def spec(self) -> ToolSpec:
        """Return the `memory_store` spec."""
        return MEMORY_STORE_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Store the memory; raises `ToolFailure` for empty or oversized text or bad tags."""
        name = MEMORY_STORE_SPEC.name
        text = arguments.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ToolFailure(name, "'text' must be a non-empty string")
        if len(text) > MAX_MEMORY_CHARS:
            raise ToolFailure(name, f"'text' is {len(text)} characters; the limit is {MAX_MEMORY_CHARS}")
        tags = _tags(arguments.get("tags", []))
        record = await self.store.store(agent=self.agent, text=text.strip(), tags=tags)
        return f"Stored memory #{record.id}."


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecallTool:
    """`memory_recall`: searches only the bound agents' memories."""

    store: MemoryStore
    agents: tuple[str, ...]

    @property
    def spec(self) -> ToolSpec:
        """Return the `memory_recall` spec."""
        return MEMORY_RECALL_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return the ranked matches; raises `ToolFailure` for a bad query or limit."""
        name = MEMORY_RECALL_SPEC.name
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailure(name, "'query' must be a non-empty string")
        limit = arguments.get("limit", _DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
            raise ToolFailure(name, f"'limit' must be an integer from 1 to {_MAX_LIMIT}")
        records = await self.store.recall(query, agents=self.agents, limit=limit)
        if not records:
            return f"No memories match {json.dumps(query, ensure_ascii=False)}."
        lines = [f"{len(records)} memories match {json.dumps(query, ensure_ascii=False)} (best first):"]
        lines.extend(_line(r) for r in records)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryForgetTool:
    """`memory_forget`: deletes only memories the bound agent wrote."""

    store: MemoryStore
    agent: str

    @property
    def spec(self) -> ToolSpec:
        """Return the `memory_forget` spec."""
        return MEMORY_FORGET_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Delete the memory; raises `ToolFailure` unless it exists and is the agent's own."""
        name = MEMORY_FORGET_SPEC.name
        memory_id = arguments.get("id")
        if isinstance(memory_id, bool) or not isinstance(memory_id, int):
            raise ToolFailure(name, "'id' must be an integer")
        if not await self.store.forget(memory_id, agent=self.agent):
            # The same answer whether the id is unknown or another agent's: no probing.
            raise ToolFailure(name, f"you have no memory #{memory_id} (only your own memories can be forgotten)")
        return f"Forgot memory #{memory_id}."


def _tags(raw: object) -> tuple[str, ...]:
    name = MEMORY_STORE_SPEC.name
    if not isinstance(raw, list) or len(raw) > _MAX_TAGS:
        raise ToolFailure(name, f"'tags' must be a list of at most {_MAX_TAGS} strings")
    tags: list[str] = []
    for tag in raw:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > _MAX_TAG_CHARS:
            raise ToolFailure(name, f"each tag must be a non-empty string of at most {_MAX_TAG_CHARS} characters")
        tags.extend(tag.split())
    return tuple(dict.fromkeys(tags))


def _line(record: MemoryRecord) -> str:
    tags = f" [{', '.join(record.tags)}]" if record.tags else ""
    return f"- #{record.id} (by {record.agent}){tags}: {record.text}"
