"""The memory tools, each bound to one store, one writing agent and the agents it may read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import Field

from orchestrator.errors import ToolFailure
from orchestrator.memory.store import MemoryRecord, MemoryStore
from orchestrator.tools import (
    MEMORY_FORGET_NAME,
    MEMORY_RECALL_NAME,
    MEMORY_STORE_NAME,
    NonBlank,
    Tool,
    ToolArguments,
    ToolSource,
    ToolSpec,
)

__all__ = [
    "MEMORY_FORGET_SPEC",
    "MemoryForgetArguments",
    "MemoryRecallArguments",
    "MemoryStoreArguments",
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
_MAX_ID: Final = 2**63 - 1  # SQLite's largest INTEGER: ids are rowids


class MemoryStoreArguments(ToolArguments):
    """The `memory_store` tool's arguments."""

    text: NonBlank = Field(min_length=1, max_length=MAX_MEMORY_CHARS, description="What to remember, self-contained.")
    tags: list[Annotated[NonBlank, Field(max_length=_MAX_TAG_CHARS)]] = Field(
        default_factory=list, max_length=_MAX_TAGS, description="Optional keywords that help recall it."
    )


class MemoryRecallArguments(ToolArguments):
    """The `memory_recall` tool's arguments."""

    query: NonBlank = Field(min_length=1, description="Keywords to look for.")
    limit: int = Field(
        default=_DEFAULT_LIMIT, ge=1, le=_MAX_LIMIT, description=f"How many matches at most (default {_DEFAULT_LIMIT})."
    )


class MemoryForgetArguments(ToolArguments):
    """The `memory_forget` tool's arguments."""

    id: int = Field(ge=1, le=_MAX_ID, description="The memory's id.")


MEMORY_STORE_SPEC: Final = ToolSpec(
    name=MEMORY_STORE_NAME,
    description=(
        "Remember a fact for later turns and sessions. Returns the memory's id "
        "(use it with memory_forget)."
    ),
    contract=MemoryStoreArguments,
    read_only=False,
    source=ToolSource.MEMORY,
)
MEMORY_RECALL_SPEC: Final = ToolSpec(
    name=MEMORY_RECALL_NAME,
    description=(
        "Search remembered facts by keywords; returns the best matches first, each with "
        "its id and the agent that wrote it."
    ),
    contract=MemoryRecallArguments,
    read_only=True,
    # Memories may quote outside content (a fetched page, another agent's notes).
    untrusted_output=True,
    source=ToolSource.MEMORY,
)
MEMORY_FORGET_SPEC: Final = ToolSpec(
    name=MEMORY_FORGET_NAME,
    description="Delete one of your own memories by its id.",
    contract=MemoryForgetArguments,
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
        checked = MemoryStoreArguments.parse(MEMORY_STORE_SPEC.name, arguments)
        tags = tuple(dict.fromkeys(word for tag in checked.tags for word in tag.split()))
        record = await self.store.store(agent=self.agent, text=checked.text.strip(), tags=tags)
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
        checked = MemoryRecallArguments.parse(MEMORY_RECALL_SPEC.name, arguments)
        query, limit = checked.query, checked.limit
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
        memory_id = MemoryForgetArguments.parse(name, arguments).id
        if not await self.store.forget(memory_id, agent=self.agent):
            # The same answer whether the id is unknown or another agent's: no probing.
            raise ToolFailure(name, f"you have no memory #{memory_id} (only your own memories can be forgotten)")
        return f"Forgot memory #{memory_id}."


def _line(record: MemoryRecord) -> str:
    tags = f" [{', '.join(record.tags)}]" if record.tags else ""
    return f"- #{record.id} (by {record.agent}){tags}: {record.text}"
