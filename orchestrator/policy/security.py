"""SecurityPolicy: the per-agent limits every tool runs under (workspace jail, commands, network)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import WorkspaceEscape
from orchestrator.policy.sandbox import UNRESOLVED, ShellSandbox

if TYPE_CHECKING:
    from orchestrator.config import Autonomy

__all__ = ["SecurityPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityPolicy:
    """One agent's resolved security limits; built by the seam, read by tools.

    `workspace` is an absolute, fully resolved path (the seam resolves it once).
    """

    agent: str
    autonomy: Autonomy
    workspace: Path
    shell_allowed_commands: frozenset[str]
    http_allowed_hosts: tuple[str, ...]
    http_allow_private_addresses: bool
    http_max_bytes: int
    # `[agents.X.shell] denied_args`: globs refused as any whole argv element, for the
    # `shell` built-in and skill shell tools alike.
    shell_denied_args: tuple[str, ...] = ()
    # `[agents.X.shell] sandbox` / `network`, resolved by the seam; absent = commands refused.
    shell_sandbox: ShellSandbox = UNRESOLVED
    # `[agents.X] workspace_max_mb` in bytes, resolved by the seam: the daemon's own writes
    # into the workspace are refused past it, and a command while the workspace is over it.
    # None only on a policy built outside the seam (tests); the seam always sets it.
    workspace_max_bytes: int | None = None

    def allows_host(self, host: str) -> bool:
        """Return whether `http_allowed_hosts` admits `host` (names or globs, case-insensitive).

        An empty list admits no host (omission is never a grant); `"*"` admits any host,
        which the private-address guard still narrows.
        """
        host = host.lower()
        return any(fnmatchcase(host, pattern.lower()) for pattern in self.http_allowed_hosts)

    def confine(self, relative: str) -> Path:
        """Return `relative` resolved inside the workspace.

        Raises `WorkspaceEscape` for absolute paths, `..` segments and symlinks that
        point outside; the check runs on the fully resolved path, so a symlink created
        after an earlier check is caught at use.
        """
        if not relative:
            relative = "."
        if os.path.isabs(relative) or "\x00" in relative or ".." in relative.replace("\\", "/").split("/"):
            raise WorkspaceEscape(relative, str(self.workspace))
        # the workspace was resolved once by the seam: a root swapped for a symlink later
        # does not move the jail
        root = str(self.workspace)
        resolved = os.path.realpath(os.path.join(root, relative))
        if resolved != root and not resolved.startswith(root + os.sep):
            raise WorkspaceEscape(relative, root)
        return Path(resolved)
