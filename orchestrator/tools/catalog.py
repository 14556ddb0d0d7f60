"""The read-only registry of built-in tools, keyed by tool name."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from orchestrator.tools.base import BuiltinTool
from orchestrator.tools.files import FILE_READ, FILE_WRITE, LIST_DIR
from orchestrator.tools.http_fetch import HTTP_FETCH
from orchestrator.tools.shell import SHELL

__all__ = ["BUILTIN_NAMES", "BUILTIN_TOOLS"]

BUILTIN_TOOLS: Final[MappingProxyType[str, BuiltinTool]] = MappingProxyType(
    {tool.spec.name: tool for tool in (FILE_READ, FILE_WRITE, LIST_DIR, SHELL, HTTP_FETCH)}
)
BUILTIN_NAMES: Final[frozenset[str]] = frozenset(BUILTIN_TOOLS)
