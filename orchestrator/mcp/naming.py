"""How an MCP server's tool is named to the model, and which tools cannot be offered at all."""

from __future__ import annotations

import re
from typing import Final

from orchestrator.mcp.offer import RemoteTool

__all__ = ["SEPARATOR", "qualified_name", "unusable_reason"]

SEPARATOR: Final = "__"
# What OpenAI-compatible APIs accept as a function name.
_FUNCTION_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def qualified_name(server: str, tool: str) -> str | None:
    """Return `<server>__<tool>`, or None when that is not a valid function name."""
    name = f"{server}{SEPARATOR}{tool}"
    return name if _FUNCTION_NAME.fullmatch(name) else None


def unusable_reason(server: str, remote: RemoteTool) -> str | None:
    """Return why `remote` cannot be offered to a model (None when it can)."""
    if qualified_name(server, remote.name) is None:
        return (
            f"'{server}{SEPARATOR}{remote.name}' is not a valid function name "
            "(letters, digits, '_' and '-', at most 64)"
        )
    if remote.task_required:
        return "it runs only as an MCP task (execution.taskSupport = \"required\"), which is not supported yet"
    return None
