"""Which sandbox an agent's commands get: `[agents.X.shell] sandbox` against what works here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import AgentConfig, Config
from orchestrator.errors import ConfigProblem
from orchestrator.policy import SandboxLimits, ShellSandbox
from orchestrator.tools import bwrap_error, bwrap_holes, landlock_abi, landlock_error, landlock_holes, seccomp_error

__all__ = [
    "SandboxHost",
    "SandboxNotice",
    "default_workspace",
    "sandbox_notices",
    "sandbox_problems",
    "shell_limits",
    "shell_sandbox",
]

_MIB = 1024**2


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxHost:
    """What a machine's sandboxes can do: each probe's error (None = works), Landlock's ABI.

    `shell_sandbox` probes this machine when given none; a test states another host's
    results (no seccomp, an old ABI) instead.
    """

    bwrap: str | None
    landlock_offline: str | None
    landlock_online: str | None
    landlock_abi: int
    seccomp: str | None

    def landlock(self, network: bool) -> str | None:
        """Return why Landlock cannot run here with `network`, None when it can."""
        return self.landlock_online if network else self.landlock_offline


def _probed_bwrap(host: SandboxHost | None, network: bool) -> tuple[str | None, tuple[str, ...]]:
    error, seccomp = (bwrap_error(), seccomp_error()) if host is None else (host.bwrap, host.seccomp)
    return error, (() if error else bwrap_holes(network, seccomp=seccomp))


def _probed_landlock(host: SandboxHost | None, network: bool) -> tuple[str | None, tuple[str, ...]]:
    if host is None:
        error, seccomp, abi = landlock_error(network), seccomp_error(), landlock_abi()
    else:
        error, seccomp, abi = host.landlock(network), host.seccomp, host.landlock_abi
    return error, (() if error else landlock_holes(network, seccomp=seccomp, abi=abi))


def shell_limits(agent: AgentConfig) -> SandboxLimits:
    """Return the limits `[agents.X.shell]` sets for every command of `agent`."""
    shell = agent.shell
    return SandboxLimits(
        cpu_seconds=shell.cpu_seconds, address_space_bytes=shell.memory_mb * _MIB,
        file_size_bytes=shell.file_size_mb * _MIB, tmp_bytes=shell.tmp_mb * _MIB,
        processes=shell.max_processes, output_bytes=shell.max_output_kb * 1024,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxNotice:
    """One line for `orchestrator check` and the daemon log; `attention` = an operator must act."""

    text: str
    attention: bool
    agent: str = ""


def default_workspace(config: Config, name: str) -> Path:
    """Return `<state_dir>-workspaces/<name>`: beside the state directory, never inside it.

    Inside `state_dir` an unsandboxed command could read every agent's sessions and
    memories through `../../*.sqlite3-wal`; the sibling holds no database.
    """
    state = config.state_path()
    return state.with_name(f"{state.name}-workspaces") / name


def _legacy_workspace(config: Config, name: str) -> Path:
    return config.state_path() / "workspaces" / name


def sandbox_notices(config: Config, *, host: SandboxHost | None = None) -> list[SandboxNotice]:
    """Return one line per shell-using agent (its sandbox) and per workspace left behind.

    An agent uses shell when its `[shell] allowed_commands` lists any command (the `shell`
    built-in and skill shell tools both need it). A default workspace from before the move
    that still holds files is named with where it moved, so no deployment loses its files
    silently. A sandbox with holes needs the operator's attention like a refused one.
    """
    lines: list[SandboxNotice] = []
    for name, agent in sorted(config.agents.items()):
        if agent.shell.allowed_commands:
            sandbox = shell_sandbox(name, agent, host=host)
            lines.append(SandboxNotice(
                text=f"agent {name}: shell sandbox {sandbox.describe()}",
                attention=sandbox.kind is None or bool(sandbox.holes), agent=name,
            ))
        legacy = _legacy_workspace(config, name)
        if agent.workspace is None and legacy.is_dir() and any(legacy.iterdir()):
            lines.append(SandboxNotice(
                text=f"agent {name}: files in the old default workspace {legacy} are no longer used; "
                f"the workspace is now {default_workspace(config, name)}: move them there "
                f"(or set [agents.{name}] workspace)",
                attention=True,
            ))
    return lines


def shell_sandbox(name: str, agent: AgentConfig, *, host: SandboxHost | None = None) -> ShellSandbox:
    """Return the sandbox `agent`'s commands run under (kind None = they are refused).

    `auto` takes the strongest that works on this machine with no hole (bwrap, then
    Landlock; each probed once per process, or read from `host`). A kind written explicitly
    is used if it works, with the holes it leaves here named in `describe()`. Only a written
    `sandbox = "none"` runs commands unconfined: omission is never a grant.
    """
    requested = agent.shell.sandbox
    network = agent.shell.network
    env = tuple(sorted(agent.shell.env.items()))
    limits = shell_limits(agent)
    if not agent.shell.allowed_commands:  # nothing can run: no need to probe this machine
        return ShellSandbox(requested=requested, kind=None, network=network, env=env, limits=limits,
                            reason="no commands are allowed for this agent")
    if requested == "none":
        return ShellSandbox(requested=requested, kind="none", network=True, env=env, limits=limits)
    errors: list[str] = []
    holey: list[str] = []
    for kind in ("bwrap", "landlock"):
        if requested not in ("auto", kind):
            continue
        error, holes = _probed_bwrap(host, network) if kind == "bwrap" else _probed_landlock(host, network)
        if error is None and (requested == kind or not holes):
            return ShellSandbox(requested=requested, kind=kind, network=network, env=env, limits=limits, holes=holes)
        errors.append(f"{kind}: {error}" if error else f"{kind} leaves open {', '.join(holes)}")
        if error is None:
            holey.append(kind)
    key = f"[agents.{name}.shell] sandbox"
    hint = f'{key} = "none" to run commands unconfined'
    if holey:
        kinds = " or ".join(f'"{kind}"' for kind in holey)
        hint = f"{key} = {kinds} to run commands with those holes, or {hint}"
    what = "no sandbox works here" if requested == "auto" else f"sandbox {requested!r} does not work here"
    return ShellSandbox(requested=requested, kind=None, network=network, limits=limits,
                        reason=f"{what} ({'; '.join(errors)}); write {hint}")


def sandbox_problems(config: Config, *, host: SandboxHost | None = None) -> list[ConfigProblem]:
    """Return one problem per agent whose written sandbox (`bwrap`, `landlock`) cannot run here.

    Every command such an agent runs would be refused. The fix that keeps commands confined
    comes first (install bubblewrap; the other sandbox when it works here); `none`, the
    unconfined choice, comes last.
    """
    problems: list[ConfigProblem] = []
    for name, agent in sorted(config.agents.items()):
        requested = agent.shell.sandbox
        if requested not in ("bwrap", "landlock") or not agent.shell.allowed_commands:
            continue
        if shell_sandbox(name, agent, host=host).kind is not None:
            continue
        network = agent.shell.network
        error = (_probed_bwrap if requested == "bwrap" else _probed_landlock)(host, network)[0]
        fixes = []
        if requested == "bwrap" and error is not None and "is not installed" in error:
            fixes.append("install it: `apt install bubblewrap` (Debian, Ubuntu; `dnf install bubblewrap` on Fedora)")
        other = "landlock" if requested == "bwrap" else "bwrap"
        if (_probed_landlock if other == "landlock" else _probed_bwrap)(host, network)[0] is None:
            fixes.append(f'write sandbox = "{other}", which works here')
        fixes.append('sandbox = "none" to run commands unconfined')
        what = (error or "it does not work").removesuffix(" (Debian package bubblewrap)")
        problems.append(ConfigProblem(
            config.origin_of(name), f"agents.{name}.shell.sandbox",
            f"{requested!r} cannot run here ({what}), so every command would be refused: "
            + "; or ".join(fixes),
        ))
    return problems
