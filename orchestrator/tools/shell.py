"""Built-in `shell`: run one allow-listed command (no shell parsing) in the agent's sandbox."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import Field

from orchestrator.errors import ToolFailure
from orchestrator.threads import in_thread
from orchestrator.tools.base import BuiltinTool, ToolSpec
from orchestrator.tools.contract import NoNul, ToolArguments
from orchestrator.tools.landlock import LandlockUnavailable
from orchestrator.tools.sandbox import launch, resolve_command, user_tasks
from orchestrator.workspace_io import workspace_usage

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["SHELL", "SHELL_SPEC", "Shell", "ShellArguments", "run_command"]

_CHUNK: Final = 16 * 1024
# How often to check whether the command exited while its output is still open.
_POLL_SECONDS: Final = 0.05
# After SIGKILL the pipes close at once; this only bounds a child that left the
# process group (setsid) while still holding them.
_CLOSE_AFTER_KILL_SECONDS: Final = 1.0


class ShellArguments(ToolArguments):
    """The `shell` tool's arguments."""

    argv: list[NoNul] = Field(min_length=1, description="Command name followed by its arguments.")

    refusals: ClassVar[Mapping[tuple[str, str], Callable[[Any], str]]] = MappingProxyType({
        ("argv", "too_short"): lambda _: "argument 'argv' must name a command",
        ("argv", "list_type"): lambda _: "argument 'argv' must be an array of strings, e.g. [\"ls\", \"-l\"]",
    })


SHELL_SPEC: Final = ToolSpec(
    name="shell",
    description=(
        "Run one allow-listed command in the agent workspace without a shell; "
        "returns the exit code, stdout and stderr."
    ),
    contract=ShellArguments,
    read_only=False,
)


@dataclass(frozen=True, slots=True)
class Shell:
    """`shell` bound to one agent's workspace and command allowlist."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `shell` spec."""
        return SHELL_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Run the command and report its exit code and output (see `run_command`)."""
        argv = ShellArguments.parse(SHELL_SPEC.name, arguments).argv
        return await run_command(tuple(argv), self.policy, tool=SHELL_SPEC.name)


async def run_command(argv: Sequence[str], policy: SecurityPolicy, *, tool: str) -> str:
    """Run `argv` under `policy` (allowlist, argument rules, sandbox) and report the result.

    The one runner for every command an agent starts (the `shell` built-in and skill shell
    tools). Raises `ToolFailure` (naming `tool`) for a refused or missing command, and for
    every command when the agent's sandbox resolved to none that works here. Under bwrap
    the command runs in its own PID namespace: when it exits, or the call is cancelled (a
    tool timeout), every process it started dies with it, `setsid` children included;
    without bwrap its process group is killed and reaped before the call returns (a
    seccomp filter keeps every process in it under Landlock). While the workspace takes
    more than `policy.workspace_max_bytes`, every command is refused.
    """
    _check_allowed(argv[0], policy, tool)
    _check_arguments(argv, policy, tool)
    sandbox = policy.shell_sandbox
    if sandbox.kind is None:
        raise ToolFailure(tool, f"command {argv[0]!r} refused: {sandbox.reason}")
    if not policy.workspace.is_dir():
        raise ToolFailure(tool, f"workspace {policy.workspace} is not a directory")
    await _check_workspace_size(argv[0], policy, tool)
    env = _child_environment(policy)
    if resolve_command(argv[0], env, cwd=policy.workspace) is None:
        raise ToolFailure(tool, f"command not found: {argv[0]!r}")
    # bwrap counts processes in its own user namespace; elsewhere the kernel counts the user's
    running = 0 if sandbox.kind == "bwrap" else await in_thread(user_tasks)
    try:
        with launch(sandbox.kind, argv, workspace=policy.workspace, network=sandbox.network,
                    env=env, limits=sandbox.limits, user_tasks=running) as started:
            process = await asyncio.create_subprocess_exec(
                *started.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=started.cwd,
                env=dict(started.env),
                start_new_session=True,
                preexec_fn=started.preexec,
                pass_fds=started.pass_fds,
            )
    except LandlockUnavailable as exc:
        raise ToolFailure(tool, f"command {argv[0]!r} refused: {exc}") from exc
    except FileNotFoundError:
        raise ToolFailure(tool, f"command not found: {argv[0]!r}") from None
    except subprocess.SubprocessError as exc:  # the sandbox setup in the child failed
        raise ToolFailure(tool, f"cannot start {argv[0]!r} in the {sandbox.kind} sandbox: {exc}") from exc
    except OSError as exc:
        raise ToolFailure(tool, f"cannot run {argv[0]!r}: {exc.strerror or exc}") from exc
    return await _supervise(process, sandbox.limits.output_bytes)


async def _check_workspace_size(command: str, policy: SecurityPolicy, tool: str) -> None:
    limit = policy.workspace_max_bytes
    if limit is None:
        return
    used = await in_thread(workspace_usage(policy.workspace).measure, limit)
    if used > limit:
        mib = 1024**2
        raise ToolFailure(tool, f"command {command!r} refused: the workspace takes {used / mib:.1f} MiB, over its "
                          f"limit of {limit / mib:.0f} MiB (workspace_max_mb); delete files to run commands again")


def _check_allowed(command: str, policy: SecurityPolicy, tool: str) -> None:
    # Exact match only: "rm" never grants "/bin/rm" or "./rm", and vice versa.
    allowed = policy.shell_allowed_commands
    if command in allowed:
        return
    if not allowed:
        reason = f"command {command!r} refused: no commands are allowed for this agent"
    else:
        reason = f"command {command!r} refused; allowed commands: {', '.join(sorted(allowed))}"
    raise ToolFailure(tool, reason)


def _check_arguments(argv: Sequence[str], policy: SecurityPolicy, tool: str) -> None:
    # `[agents.X.shell] denied_args`: whole-element globs, refused anywhere in argv.
    for index, item in enumerate(argv):
        for pattern in policy.shell_denied_args:
            if fnmatch.fnmatchcase(item, pattern):
                raise ToolFailure(
                    tool, f"argv[{index}] {item!r} refused: it matches denied argument {pattern!r}"
                )


def _child_environment(policy: SecurityPolicy) -> dict[str, str]:
    # Nothing from the daemon's environment but PATH, and only its absolute entries:
    # an empty or relative entry would run a binary the agent planted in its workspace.
    # Then what the agent's `[shell] env` declares (it cannot set PATH or HOME).
    search = [p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return {
        "LANG": "C.UTF-8",
        **dict(policy.shell_sandbox.env),
        "PATH": os.pathsep.join(search) or os.defpath,
        "HOME": str(policy.workspace),
    }


async def _supervise(process: asyncio.subprocess.Process, cap: int) -> str:
    assert process.stdout is not None and process.stderr is not None
    finished = False
    try:
        async with asyncio.TaskGroup() as group:
            stdout = group.create_task(_read_capped(process.stdout, cap))
            stderr = group.create_task(_read_capped(process.stderr, cap))
            pending = {stdout, stderr}
            # Python 3.11's Process.wait() also waits for the pipes to close, so a
            # background child would block it; watch the leader's exit instead.
            while pending and process.returncode is None:
                _, pending = await asyncio.wait(pending, timeout=_POLL_SECONDS)
            if pending:
                _kill_group(process.pid)
        returncode = await process.wait()
        finished = True
    finally:
        # Nothing the command started outlives the call, whether it finished or not.
        _kill_group(process.pid)
        if not finished:
            await _close_after_kill(process)
    return _report(returncode, stdout.result(), stderr.result())


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(_CHUNK):
        room = cap - len(kept)
        kept += chunk[:room]
        dropped += max(0, len(chunk) - room)
    return bytes(kept), dropped


async def _close_after_kill(process: asyncio.subprocess.Process) -> None:
    # Reading the pipes to EOF resumes paused transports so asyncio can close them
    # (no ResourceWarning) and lets wait() return.
    try:
        async with asyncio.timeout(_CLOSE_AFTER_KILL_SECONDS):
            for stream in (process.stdout, process.stderr):
                while stream is not None and await stream.read(_CHUNK):
                    pass
            await process.wait()
    except TimeoutError:
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _report(returncode: int, stdout: tuple[bytes, int], stderr: tuple[bytes, int]) -> str:
    if returncode < 0:
        try:
            status = f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            status = f"killed by signal {-returncode}"
    else:
        status = f"exit code: {returncode}"
    return "\n".join(
        [status, "--- stdout ---", _text(*stdout), "--- stderr ---", _text(*stderr)]
    )


def _text(data: bytes, dropped: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[... {dropped} more bytes not shown]"
    return text


SHELL: Final = BuiltinTool(spec=SHELL_SPEC, bind=Shell)
