"""Tools: the Tool protocol and the built-in tools every agent may be granted."""

from orchestrator.tools.base import BuiltinTool, Tool, ToolSource, ToolSpec
from orchestrator.tools.catalog import BUILTIN_NAMES, BUILTIN_TOOLS
from orchestrator.tools.http_fetch import fetch_url
from orchestrator.tools.shell import run_command

__all__ = [
    "BUILTIN_NAMES",
    "BUILTIN_TOOLS",
    "BuiltinTool",
    "Tool",
    "ToolSource",
    "ToolSpec",
    "fetch_url",
    "run_command",
]
