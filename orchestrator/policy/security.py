"""SecurityPolicy: the per-agent limits every tool runs under (workspace jail, commands, network)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.models import Autonomy
from orchestrator.errors import WorkspaceEscape

__all__ = ["SecurityPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityPolicy:
    """One agent's resolved security limits; built by the seam, read by tools."""

    agent: str
    autonomy: Autonomy
    workspace: Path
    shell_allowed_commands: frozenset[str]
    http_allowed_hosts: tuple[str, ...]
    http_allow_private_addresses: bool
    http_max_bytes: int

    def confine(self, relative: str) -> Path:
        """Return `relative` resolved inside the workspace.

        Raises `WorkspaceEscape` for absolute paths, `..` segments and symlinks that
        point outside; the check runs on the fully resolved path, so a symlink created
        after an earlier check is caught at use.
        """
        if not relative:
            relative = "."
        candidate = Path(relative)
        if candidate.is_absolute() or ".." in candidate.parts or "\x00" in relative:
            raise WorkspaceEscape(relative, str(self.workspace))
        root = self.workspace.resolve()
        resolved = Path(os.path.realpath(root / candidate))
        if resolved != root and root not in resolved.parents:
            raise WorkspaceEscape(relative, str(self.workspace))
        return resolved
