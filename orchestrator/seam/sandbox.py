"""Which sandbox an agent's commands get: `[agents.X.shell] sandbox` against what works here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import AgentConfig, Config
from orchestrator.policy import ShellSandbox
from orchestrator.tools import bwrap_error, landlock_error

__all__ = ["SandboxNotice", "default_workspace", "sandbox_notices", "shell_sandbox"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxNotice:
    """One line for `orchestrator check` and the daemon log; `attention` = an operator must act."""

    text: str
    attention: bool


def default_workspace(config: Config, name: str) -> Path:
    """Return `<state_dir>-workspaces/<name>`: beside the state directory, never inside it.

    Inside `state_dir` an unsandboxed command could read every agent's sessions and
    memories through `../../*.sqlite3-wal`; the sibling holds no database.
    """
    state = config.state_path()
    return state.with_name(f"{state.name}-workspaces") / name


def _legacy_workspace(config: Config, name: str) -> Path:
    return config.state_path() / "workspaces" / name


def sandbox_notices(config: Config) -> list[SandboxNotice]:
    """Return one line per shell-using agent (its sandbox) and per workspace left behind.

    An agent uses shell when its `[shell] allowed_commands` lists any command (the `shell`
    built-in and skill shell tools both need it). A default workspace from before the move
    that still holds files is named with where it moved, so no deployment loses its files
    silently.
    """
    lines: list[SandboxNotice] = []
    for name, agent in sorted(config.agents.items()):
        if agent.shell.allowed_commands:
            sandbox = shell_sandbox(name, agent)
            lines.append(SandboxNotice(
                text=f"agent {name}: shell sandbox {sandbox.describe()}", attention=sandbox.kind is None
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


def shell_sandbox(name: str, agent: AgentConfig) -> ShellSandbox:
    """Return the sandbox `agent`'s commands run under (kind None = they are refused).

    `auto` takes the strongest that works on this machine (bwrap, then Landlock; each
    probed once per process). A kind written explicitly is used only if it works. Only a
    written `sandbox = "none"` runs commands unconfined: omission is never a grant.
    """
    requested = agent.shell.sandbox
    network = agent.shell.network
    env = tuple(sorted(agent.shell.env.items()))
    if not agent.shell.allowed_commands:  # nothing can run: no need to probe this machine
        return ShellSandbox(requested=requested, kind=None, network=network, env=env,
                            reason="no commands are allowed for this agent")
    if requested == "none":
        return ShellSandbox(requested=requested, kind="none", network=True, env=env)
    errors: list[str] = []
    for kind in ("bwrap", "landlock"):
        if requested not in ("auto", kind):
            continue
        error = bwrap_error() if kind == "bwrap" else landlock_error(network)
        if error is None:
            return ShellSandbox(requested=requested, kind=kind, network=network, env=env)
        errors.append(f"{kind}: {error}")
    hint = f'write [agents.{name}.shell] sandbox = "none" to run commands unconfined'
    what = "no sandbox works here" if requested == "auto" else f"sandbox {requested!r} does not work here"
    return ShellSandbox(requested=requested, kind=None, network=network, reason=f"{what} ({'; '.join(errors)}); {hint}")
