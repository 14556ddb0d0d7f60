"""ShellSandbox: the resolved sandbox every command an agent runs goes through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["SANDBOX_KINDS", "SandboxKind", "SandboxLimits", "SandboxRequest", "ShellSandbox"]

SandboxRequest = Literal["auto", "bwrap", "landlock", "none"]
SandboxKind = Literal["bwrap", "landlock", "none"]
SANDBOX_KINDS: Final[tuple[SandboxKind, ...]] = ("bwrap", "landlock", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Resource limits set in the command's process (inherited by everything it starts)."""

    cpu_seconds: int = 60
    address_space_bytes: int = 4 * 1024**3
    file_size_bytes: int = 256 * 1024**2


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellSandbox:
    """Which sandbox an agent's commands run under; `kind` None = commands are refused.

    `reason` says why `kind` is None (one line, shown to the model and in `orchestrator check`).
    """

    requested: SandboxRequest
    kind: SandboxKind | None
    network: bool = False
    reason: str = ""
    limits: SandboxLimits = SandboxLimits()
    # `[agents.X.shell] env`, sorted by name: added to every command's minimal environment
    env: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """Return one line: `bwrap (network off)`, `... env: A, B`, or `refused: <reason>`."""
        if self.kind is None:
            return f"refused: {self.reason}"
        names = f", env: {', '.join(name for name, _ in self.env)}" if self.env else ""
        return f"{self.kind} (network {'on' if self.network else 'off'}{names})"


# The default on a SecurityPolicy built without one: omission is never a grant.
UNRESOLVED: Final = ShellSandbox(requested="auto", kind=None, reason="no sandbox was resolved for this agent")
