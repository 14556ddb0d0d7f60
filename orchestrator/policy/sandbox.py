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
    """Resource limits of one command and everything it starts (`[agents.X.shell]` keys).

    The defaults are the config's defaults: a policy built outside the seam is as bounded.
    """

    cpu_seconds: int = 60
    address_space_bytes: int = 4 * 1024**3
    file_size_bytes: int = 256 * 1024**2
    # bwrap's private /tmp (a tmpfs: host memory)
    tmp_bytes: int = 64 * 1024**2
    # processes and threads at once (RLIMIT_NPROC: per user namespace under bwrap)
    processes: int = 256
    # captured per stream (stdout, stderr); the rest is counted, not kept
    output_bytes: int = 64 * 1024

    def describe(self) -> str:
        """Return one line: `cpu 60s, memory 4096 MiB, file 256 MiB, /tmp 64 MiB, 256 processes, output 64 KiB`."""
        mib = 1024**2
        return (f"cpu {self.cpu_seconds}s, memory {self.address_space_bytes // mib} MiB, "
                f"file {self.file_size_bytes // mib} MiB, /tmp {self.tmp_bytes // mib} MiB, "
                f"{self.processes} processes, output {self.output_bytes // 1024} KiB")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellSandbox:
    """Which sandbox an agent's commands run under; `kind` None = commands are refused.

    `reason` says why `kind` is None (one line, shown to the model and in `orchestrator check`).
    `holes` names what the sandbox leaves open on this host (Landlock without seccomp, an
    old Landlock ABI): `auto` never picks a sandbox with holes, a written kind may.
    """

    requested: SandboxRequest
    kind: SandboxKind | None
    network: bool = False
    reason: str = ""
    limits: SandboxLimits = SandboxLimits()
    # `[agents.X.shell] env`, sorted by name: added to every command's minimal environment
    env: tuple[tuple[str, str], ...] = ()
    holes: tuple[str, ...] = ()

    def describe(self) -> str:
        """Return one line: `bwrap (network off)`, `... env: A, B`, `...; open: <holes>` or `refused: <reason>`."""
        if self.kind is None:
            return f"refused: {self.reason}"
        names = f", env: {', '.join(name for name, _ in self.env)}" if self.env else ""
        holes = f"; open: {', '.join(self.holes)}" if self.holes else ""
        return f"{self.kind} (network {'on' if self.network else 'off'}{names}){holes}"


# The default on a SecurityPolicy built without one: omission is never a grant.
UNRESOLVED: Final = ShellSandbox(requested="auto", kind=None, reason="no sandbox was resolved for this agent")
