"""ServerOffer: an immutable snapshot of what one connected MCP server offers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp.types

__all__ = ["RemoteResource", "RemoteTool", "ServerOffer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteTool:
    """One tool as the server lists it; `read_only` is its `readOnlyHint` (absent = False)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool
    # `execution.taskSupport = "required"`: callable only as an MCP task (not supported yet)
    task_required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteResource:
    """One resource as the server lists it."""

    uri: str
    name: str
    description: str
    mime_type: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOffer:
    """The tools and resources a server listed the last time it was asked."""

    tools: tuple[RemoteTool, ...]
    resources: tuple[RemoteResource, ...]

    @classmethod
    def from_listing(
        cls, tools: Iterable[mcp.types.Tool], resources: Iterable[mcp.types.Resource]
    ) -> ServerOffer:
        """Build a snapshot from the SDK's listing models (later duplicates of a name lose)."""
        by_name: dict[str, RemoteTool] = {}
        for tool in tools:
            hint = tool.annotations.read_only_hint if tool.annotations is not None else None
            by_name.setdefault(
                tool.name,
                RemoteTool(
                    name=tool.name,
                    description=tool.description or tool.title or "",
                    input_schema=_freeze(tool.input_schema),
                    read_only=hint is True,
                    task_required=tool.execution is not None and tool.execution.task_support == "required",
                ),
            )
        listed = {
            r.uri: RemoteResource(
                uri=str(r.uri), name=r.name, description=r.description or "", mime_type=r.mime_type
            )
            for r in resources
        }
        return cls(
            tools=tuple(sorted(by_name.values(), key=lambda t: t.name)),
            resources=tuple(sorted(listed.values(), key=lambda r: r.uri)),
        )

    def tool(self, name: str) -> RemoteTool | None:
        """Return the tool called `name`, or None."""
        return next((t for t in self.tools if t.name == name), None)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value
