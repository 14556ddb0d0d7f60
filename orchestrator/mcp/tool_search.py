"""`tool_search`: how a deferred-mode agent finds its gated MCP tools and learns their parameters.

Activation needs no state: the deferred tools are already in the agent's sealed registry
(only their specs are withheld from the provider), so once `tool_search` has shown a
tool's name and parameters the model calls it by that exact name and the engine runs it
through the registry like any other. The catalog is exactly the agent's surviving
deferred tools, so a search can never surface anything the agent could not run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import Field

from orchestrator.tools import TOOL_SEARCH_NAME, ToolArguments, ToolSource, ToolSpec

__all__ = ["TOOL_SEARCH_SPEC", "ToolSearch", "ToolSearchArguments", "deferred_section"]

_DEFAULT_LIMIT: Final = 5
_MAX_LIMIT: Final = 20
_LISTED_DESCRIPTION_CHARS: Final = 120


class ToolSearchArguments(ToolArguments):
    """The `tool_search` tool's arguments."""

    query: str = Field(description="words to look for, or an exact tool name")
    limit: int = Field(
        default=_DEFAULT_LIMIT, ge=1, le=_MAX_LIMIT, description=f"at most this many tools (default {_DEFAULT_LIMIT})"
    )


TOOL_SEARCH_SPEC: Final = ToolSpec(
    name=TOOL_SEARCH_NAME,
    description=(
        "Find tools that are available to you but not loaded yet. Give a few words, or an "
        "exact tool name; the answer lists matching tools with their parameters. Then call a "
        "tool by its exact name."
    ),
    contract=ToolSearchArguments,
    read_only=True,
    untrusted_output=True,  # descriptions and schemas come from the servers
    source=ToolSource.SEAM,
)


class ToolSearch:
    """Search one agent's deferred MCP tools (and nothing else)."""

    __slots__ = ("_catalog",)

    def __init__(self, catalog: Iterable[ToolSpec]) -> None:
        self._catalog = tuple(sorted(catalog, key=lambda s: s.name))

    @property
    def spec(self) -> ToolSpec:
        return TOOL_SEARCH_SPEC

    @property
    def names(self) -> tuple[str, ...]:
        """Return the names this search can surface."""
        return tuple(s.name for s in self._catalog)

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return the matching tools as JSON; raises `ToolFailure` for bad arguments."""
        checked = ToolSearchArguments.parse(TOOL_SEARCH_NAME, arguments)
        limit = checked.limit
        found = self._search(checked.query.strip())
        return json.dumps(
            {
                "matches": [
                    {
                        "name": s.name,
                        "description": s.description,
                        "parameters": s.openai_spec()["function"]["parameters"],
                    }
                    for s in found[:limit]
                ],
                "more": max(0, len(found) - limit),
                "how_to_use": "Call a tool by its exact name with arguments that follow its parameters.",
            },
            ensure_ascii=False,
        )

    def _search(self, query: str) -> list[ToolSpec]:
        exact = [s for s in self._catalog if s.name == query]
        if exact or "__" in query:  # a qualified name: that tool or nothing, never fuzzy
            return exact
        words = [w for w in query.lower().replace("__", " ").replace("_", " ").split() if w != "*"]
        if not words:
            return list(self._catalog)
        scored = []
        for spec in self._catalog:
            haystack = f"{spec.name.replace('_', ' ')} {spec.description}".lower()
            score = sum(1 for w in words if w in haystack)
            if score:
                scored.append((-score, spec.name, spec))
        return [spec for _, _, spec in sorted(scored, key=lambda x: (x[0], x[1]))]


def deferred_section(specs: Iterable[ToolSpec]) -> str:
    """Return the system-prompt section listing deferred tools by name."""
    lines = [
        "More tools are available on request. They are not loaded yet: call `tool_search` "
        "with a few words or an exact name below to get a tool's parameters, then call it by "
        "its exact name.",
    ]
    for spec in sorted(specs, key=lambda s: s.name):
        summary = " ".join(spec.description.split())[:_LISTED_DESCRIPTION_CHARS]
        lines.append(f"- {spec.name}: {summary}" if summary else f"- {spec.name}")
    return "\n".join(lines)
