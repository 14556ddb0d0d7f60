"""Render MCP tool results and resource contents as the text a model reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from orchestrator.errors import ToolFailure

if TYPE_CHECKING:
    import mcp.types

__all__ = ["render_call_result", "render_resource"]


def render_call_result(display: str, result: mcp.types.CallToolResult) -> str:
    """Return a tool result as text; raise `ToolFailure` when the server flagged an error."""
    text = "\n".join(_blocks(result.content))
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if result.is_error:
        raise ToolFailure(display, text or "the MCP tool reported an error without details")
    return text


def render_resource(result: mcp.types.ReadResourceResult) -> str:
    """Return a resource's contents as text; binary parts are described, not inlined."""
    import mcp.types as types

    parts: list[str] = []
    for content in result.contents:
        if isinstance(content, types.TextResourceContents):
            parts.append(content.text)
        else:
            parts.append(f"[binary resource {content.uri} ({content.mime_type or 'unknown type'})]")
    return "\n".join(parts)


def _blocks(blocks: Iterable[mcp.types.ContentBlock]) -> Iterable[str]:
    import mcp.types as types

    for block in blocks:
        if isinstance(block, types.TextContent):
            yield block.text
        elif isinstance(block, (types.ImageContent, types.AudioContent)):
            yield f"[{block.type} ({block.mime_type}), not shown]"
        elif isinstance(block, types.ResourceLink):
            yield f"[resource link {block.uri}]"
        elif isinstance(block.resource, types.TextResourceContents):
            yield block.resource.text
        else:
            yield f"[binary resource {block.resource.uri}, not shown]"
