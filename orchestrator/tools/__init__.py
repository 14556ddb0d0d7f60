"""Tools: the Tool protocol and the built-in tools every agent may be granted."""

from orchestrator.tools.base import BuiltinTool, Tool, ToolSource, ToolSpec
from orchestrator.tools.catalog import BUILTIN_NAMES, BUILTIN_TOOLS
from orchestrator.tools.contract import InvalidArguments, NoNul, NonBlank, ToolArguments
from orchestrator.tools.delegate import ChildOutcome, ChildTurn, DelegateTool, Delegation
from orchestrator.tools.http_fetch import fetch_url
from orchestrator.tools.reserved import (
    DELEGATE_TOOL_NAME,
    MEMORY_FORGET_NAME,
    MEMORY_RECALL_NAME,
    MEMORY_STORE_NAME,
    MEMORY_TOOL_NAMES,
    RESERVED_TOOL_NAMES,
    SEAM_TOOL_NAMES,
    SEND_FILE_NAME,
    TOOL_SEARCH_NAME,
)
from orchestrator.tools.send_file import SEND_FILE_SPEC, ChatOutlet, SendFileTool, bind_outlet, current_outlet
from orchestrator.tools.landlock import abi_version as landlock_abi
from orchestrator.tools.sandbox import bwrap_error, bwrap_holes, landlock_error, landlock_holes, launch
from orchestrator.tools.seccomp import seccomp_error
from orchestrator.tools.shell import run_command

__all__ = [
    "BUILTIN_NAMES",
    "BUILTIN_TOOLS",
    "BuiltinTool",
    "ChildOutcome",
    "ChildTurn",
    "DelegateTool",
    "Delegation",
    "InvalidArguments",
    "NoNul",
    "NonBlank",
    "DELEGATE_TOOL_NAME",
    "MEMORY_FORGET_NAME",
    "MEMORY_RECALL_NAME",
    "MEMORY_STORE_NAME",
    "MEMORY_TOOL_NAMES",
    "RESERVED_TOOL_NAMES",
    "SEAM_TOOL_NAMES",
    "SEND_FILE_NAME",
    "SEND_FILE_SPEC",
    "ChatOutlet",
    "SendFileTool",
    "bind_outlet",
    "current_outlet",
    "TOOL_SEARCH_NAME",
    "Tool",
    "ToolArguments",
    "ToolSource",
    "ToolSpec",
    "bwrap_error",
    "bwrap_holes",
    "fetch_url",
    "landlock_abi",
    "landlock_error",
    "landlock_holes",
    "seccomp_error",
    "launch",
    "run_command",
]
