"""How a command is launched under each sandbox kind: bubblewrap, Landlock or none.

This module only knows mechanisms (which kinds this machine supports, probed once, and how to
start a command under one); which kind an agent gets is decided in the seam and arrives here
as `SecurityPolicy.shell_sandbox`.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Final

from orchestrator.policy import SandboxKind, SandboxLimits
from orchestrator.tools.landlock import LandlockUnavailable, Ruleset, build_ruleset
from orchestrator.tools.seccomp import Filter, build_filter, seccomp_error

__all__ = [
    "BWRAP", "Launch", "bwrap_arguments", "bwrap_error", "bwrap_holes", "landlock_error", "landlock_holes",
    "launch", "resolve_command", "user_tasks",
]

BWRAP: Final = "/usr/bin/bwrap"
# util-linux (Essential in Debian): sets the limits just before the command runs, so the
# daemon spawns without a Python preexec hook (which forces a slow fork instead of vfork).
PRLIMIT: Final = "/usr/bin/prlimit"
# The system directories a command may read and execute (read-only in either sandbox).
_SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The pieces of /etc the usual commands need: the loader cache and Debian's alternatives
# (`awk` is /etc/alternatives/awk); /etc/localtime is a symlink into /usr and stays one.
_ETC_FILES: Final = ("/etc/ld.so.cache", "/etc/alternatives")
# Only with network = true: name resolution and TLS roots.
_ETC_NETWORK: Final = (
    "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/ssl", "/etc/ca-certificates",
)
# Each bind costs a mount in the sandbox's namespace: only the devices commands use
# (bwrap's full --dev adds a few milliseconds to every command).
_DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_DEV_LINKS: Final = (("/proc/self/fd", "/dev/fd"), ("/proc/self/fd/0", "/dev/stdin"),
                     ("/proc/self/fd/1", "/dev/stdout"), ("/proc/self/fd/2", "/dev/stderr"))
_PROBE_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """What `asyncio.create_subprocess_exec` needs to start one sandboxed command."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    preexec: Callable[[], None] | None
    pass_fds: tuple[int, ...] = field(default=())


@cache
def bwrap_error() -> str | None:
    """Return why bubblewrap cannot sandbox here, None when it can (probed once per process)."""
    if not os.access(BWRAP, os.X_OK):
        return f"{BWRAP} is not installed (Debian package bubblewrap)"
    probe = [BWRAP, *_namespaces(network=False), *_system_mounts(network=False), "--", "/usr/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{BWRAP} did not run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"{BWRAP} cannot create namespaces here: {reason[0]}"
    return None


@cache
def landlock_error(network: bool) -> str | None:
    """Return why Landlock cannot sandbox here (for `network`), None when it can."""
    try:
        build_ruleset(read_only=(), writable=(), rw_files=(), network=network).close()
    except LandlockUnavailable as exc:
        return exc.reason
    return None


def bwrap_holes(network: bool, *, seccomp: str | None) -> tuple[str, ...]:
    """Return what bwrap leaves open on a host with this seccomp probe result.

    With `network = true` the command shares the host's network namespace and so its
    abstract unix sockets; the seccomp filter closes them where it applies.
    """
    if network and seccomp is not None:
        return ("abstract unix sockets of the host (network = true)", "io_uring")
    return ()


def landlock_holes(network: bool, *, seccomp: str | None, abi: int) -> tuple[str, ...]:
    """Return what Landlock leaves open on a host with this seccomp probe result and ABI.

    `seccomp` is `seccomp_error()` (None = the filter applies); `abi` is the Landlock ABI.
    Empty when every hole the seccomp filter and the ruleset close is closed.
    """
    holes: list[str] = []
    if seccomp is not None:
        holes.append("unix sockets (tmux, ssh-agent, D-Bus: commands outside the sandbox)")
        if not network:
            holes.append("UDP")
        holes += ["setsid children outlive the call", "io_uring"]
    if abi < 6:
        holes.append(f"signals to the daemon user's processes (Landlock ABI {abi} < 6)")
    return tuple(holes)


@contextmanager
def launch(
    kind: SandboxKind, argv: Sequence[str], *, workspace: Path, network: bool, env: Mapping[str, str],
    limits: SandboxLimits, user_tasks: int = 0, read_only: Sequence[str] = (),
) -> Iterator[Launch]:
    """Yield how to start `argv` under sandbox `kind` ("bwrap", "landlock" or "none").

    `user_tasks` is what the daemon's user runs now (`user_tasks()`), needed outside bwrap,
    where the kernel counts `limits.processes` per user rather than per sandbox.
    `read_only` are further paths the command may read (e.g. an interpreter outside /usr).

    The parent's copies of any descriptors handed to the child are closed on exit, so
    leave the context only once the process has started. Raises `LandlockUnavailable`
    when the Landlock ruleset cannot be built.
    """
    if kind == "bwrap":
        with _bwrap_launch(argv, workspace=workspace, network=network, env=env, limits=limits,
                           read_only=read_only) as started:
            yield started
    elif kind == "landlock":
        ruleset = build_ruleset(
            read_only=(*_SYSTEM_DIRS, *_ETC_FILES, "/etc/localtime", *(_ETC_NETWORK if network else ()), *_DEVICES,
                       *read_only),
            writable=(str(workspace),),
            rw_files=("/dev/null",),
            network=network,
        )
        # Without seccomp on this host the filter is left out: the seam names those holes,
        # and only a written `sandbox = "landlock"` runs with them.
        seccomp = build_filter(network=network) if seccomp_error() is None else None
        try:
            yield Launch(argv=tuple(argv), cwd=workspace, env=env,
                         preexec=_in_child(limits, user_tasks + limits.processes, seccomp, ruleset))
        finally:
            ruleset.close()
    elif kind == "none":
        limited, preexec = _limited(argv, limits, user_tasks + limits.processes)
        yield Launch(argv=limited, cwd=workspace, env=env, preexec=preexec)
    else:
        raise ValueError(f"unknown sandbox kind {kind!r}")


@contextmanager
def _bwrap_launch(
    argv: Sequence[str], *, workspace: Path, network: bool, env: Mapping[str, str], limits: SandboxLimits,
    read_only: Sequence[str],
) -> Iterator[Launch]:
    uid, gid = os.getuid(), os.getgid()
    # A minimal passwd/group naming only the sandbox user: no other account is visible.
    files = {
        "/etc/passwd": f"sandbox:x:{uid}:{gid}:sandbox:{workspace}:/usr/sbin/nologin\n",
        "/etc/group": f"sandbox:x:{gid}:\n",
    }
    fds: list[int] = []
    try:
        data_args: list[str] = []
        for target, text in files.items():
            read, write = os.pipe()
            fds.append(read)
            os.write(write, text.encode())
            os.close(write)
            data_args += ["--ro-bind-data", str(read), target]
        command = [
            BWRAP,
            *_namespaces(network=network),
            *_system_mounts(network=network),
            *data_args,
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            *(arg for path in read_only for arg in ("--ro-bind", path, path)),
            "--bind", str(workspace), str(workspace),
            "--chdir", str(workspace),
        ]
        if network and seccomp_error() is None:
            # the host's network namespace holds its abstract unix sockets: refuse AF_UNIX
            read, write = os.pipe()
            fds.append(read)
            os.write(write, build_filter(network=True, sessions=False).code)
            os.close(write)
            command += ["--seccomp", str(read)]
        # RLIMIT_NPROC counts per user namespace: inside bwrap's, only the sandbox's processes.
        limited, preexec = _limited(argv, limits, limits.processes)
        yield Launch(argv=(*command, "--", *limited), cwd=workspace, env=env, preexec=preexec,
                     pass_fds=tuple(fds))
    finally:
        for fd in fds:
            os.close(fd)


def bwrap_arguments(*, network: bool) -> list[str]:
    """Return the namespace options every sandboxed command gets (the systemd unit must allow them)."""
    return _namespaces(network=network)


def _namespaces(*, network: bool) -> list[str]:
    # A new PID namespace: the fresh /proc shows only the sandbox, and when its init dies
    # (the command exits, or the daemon kills bwrap at the timeout) every process in it dies.
    # No --new-session: bwrap itself starts in a new session without a controlling terminal.
    out = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        out.append("--unshare-net")
    return [*out, "--die-with-parent", "--cap-drop", "ALL"]


@cache
def _system_mounts(*, network: bool) -> tuple[str, ...]:
    # The same for every command of this process: read the host's layout once.
    out: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    for path in (*_ETC_FILES, *(_ETC_NETWORK if network else ())):
        out += ["--ro-bind-try", path, path]
    if os.path.islink("/etc/localtime"):
        out += ["--symlink", os.readlink("/etc/localtime"), "/etc/localtime"]
    for device in _DEVICES:
        out += ["--dev-bind-try", device, device]
    for target, link in _DEV_LINKS:
        out += ["--symlink", target, link]
    return (*out, "--proc", "/proc")


def user_tasks() -> int:
    """Return how many tasks (processes and threads) the daemon's user runs now (reads /proc).

    Outside a user namespace the kernel counts RLIMIT_NPROC over every task of the user (the
    daemon's own threads, its MCP servers, other commands), so a command's limit is this
    plus its `max_processes`. The daemon's own limit is untouched: only the command's forks
    fail. (The kernel never applies it to root.)
    """
    uid = os.getuid()
    tasks = 0
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    tasks += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue  # gone meanwhile
    return tasks


def _nproc(processes: int) -> int:
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    return processes if hard == resource.RLIM_INFINITY else min(processes, hard)


def _limited(
    argv: Sequence[str], limits: SandboxLimits, processes: int
) -> tuple[tuple[str, ...], Callable[[], None] | None]:
    """Return `argv` run through prlimit, or as is with a preexec hook setting the limits."""
    if not os.access(PRLIMIT, os.X_OK):
        return tuple(argv), _in_child(limits, processes, None, None)
    prefix = (
        PRLIMIT, f"--cpu={limits.cpu_seconds}", f"--as={limits.address_space_bytes}",
        f"--fsize={limits.file_size_bytes}", f"--nproc={_nproc(processes)}", "--core=0", "--",
    )
    return (*prefix, *argv), None


def _in_child(
    limits: SandboxLimits, processes: int, seccomp: Filter | None, ruleset: Ruleset | None
) -> Callable[[], None]:
    nproc = _nproc(processes)

    def preexec() -> None:
        # Runs in the child between fork and exec: limits first, then the seccomp filter,
        # then Landlock (both set no_new_privs), so nothing the command execs can lift them.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes, limits.address_space_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if seccomp is not None:
            seccomp.apply()
        if ruleset is not None:
            ruleset.enforce()

    return preexec


def resolve_command(command: str, env: Mapping[str, str], *, cwd: Path) -> str | None:
    """Return where `command` is found on the child's PATH (or as given with a slash), else None."""
    if "/" in command:
        found = cwd / command
        return str(found) if os.access(found, os.X_OK) else None
    return shutil.which(command, path=env.get("PATH", os.defpath))
