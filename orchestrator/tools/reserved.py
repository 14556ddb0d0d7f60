"""The one catalog of reserved tool names: tools the seam adds beside the built-ins.

Config checks, the seam and the packages that build these tools all read the names here,
so a name is written once. None of them can be granted through a glob in `tools`.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DELEGATE_TOOL_NAME",
    "MEMORY_FORGET_NAME",
    "MEMORY_RECALL_NAME",
    "MEMORY_STORE_NAME",
    "MEMORY_TOOL_NAMES",
    "RESERVED_TOOL_NAMES",
    "SEAM_TOOL_NAMES",
    "SEND_FILE_NAME",
    "TOOL_SEARCH_NAME",
]

# Granted by naming it exactly in `tools` (never by a glob) plus a non-empty `delegates`.
DELEGATE_TOOL_NAME: Final = "delegate"
# Granted by naming it exactly in `tools` (never by a glob); offered only on a path with a chat.
SEND_FILE_NAME: Final = "send_file"
# The deferred-MCP search: added with a deferred bundle, never named in `tools`.
TOOL_SEARCH_NAME: Final = "tool_search"
MEMORY_STORE_NAME: Final = "memory_store"
MEMORY_RECALL_NAME: Final = "memory_recall"
MEMORY_FORGET_NAME: Final = "memory_forget"
# Granted by `[agents.X.memory] scope = "agent"`, never by `tools`; the ACP strip removes them.
MEMORY_TOOL_NAMES: Final[frozenset[str]] = frozenset({MEMORY_STORE_NAME, MEMORY_RECALL_NAME, MEMORY_FORGET_NAME})
# Tools the seam itself adds: valid in excluded_tools and the approval lists, never in `tools`.
SEAM_TOOL_NAMES: Final[frozenset[str]] = frozenset({TOOL_SEARCH_NAME})
RESERVED_TOOL_NAMES: Final[frozenset[str]] = frozenset(
    {DELEGATE_TOOL_NAME, SEND_FILE_NAME, *SEAM_TOOL_NAMES, *MEMORY_TOOL_NAMES}
)
