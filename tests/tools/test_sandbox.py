"""The sandbox, attacked through the `shell` entry point as a prompt-injected model would.

Every test runs real bubblewrap (or real Landlock) on this machine; the "none" cases show
the same attack succeeding unconfined, so each assertion is one that could fail.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.policy import SandboxKind, SecurityPolicy, ShellSandbox
from orchestrator.tools import BUILTIN_TOOLS, Tool

SECRET = "sentinel-bot-token-8c1f"
CONFINED: list[SandboxKind] = ["bwrap", "landlock"]


def _shell(workspace: Path, *allowed: str, kind: SandboxKind, network: bool = False,
           sandbox: ShellSandbox | None = None) -> Tool:
    policy = SecurityPolicy(
        agent="ops",
        autonomy="full",
        workspace=workspace.resolve(),
        shell_allowed_commands=frozenset(allowed),
        http_allowed_hosts=(),
        http_allow_private_addresses=False,
        http_max_bytes=1024,
        **({"shell_sandbox": sandbox or ShellSandbox(requested=kind, kind=kind, network=network)}),
    )
    return BUILTIN_TOOLS["shell"].bind(policy)


async def _run(tool: Tool, *argv: str) -> str:
    return await tool.invoke({"argv": list(argv)})


def _host_pids(marker: str) -> list[int]:
    """Return live host processes whose argv contains `marker` (a unique `sleep` duration)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if marker.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


async def _gone(marker: str, seconds: float = 3.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if not _host_pids(marker):
            return True
        await asyncio.sleep(0.05)
    return False


def _marker() -> str:
    return f"31.{uuid.uuid4().int % 10**9:09d}"


@pytest.fixture
def daemon() -> Iterator[int]:
    """A stand-in daemon started with the bot token in its environment; yields its pid.

    /proc/<pid>/environ shows the environment a process was started with, so the secret
    must be there from exec (as the real daemon's is); the end-to-end test in
    tests/cli/test_sandbox_cli.py attacks the real `orchestrator agent` process.
    """
    env = {**os.environ, "ORCHESTRATOR_TEST_BOT_TOKEN": SECRET}
    process = subprocess.Popen(["sleep", "60"], env=env)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("kind", CONFINED)
async def test_proc_environ_of_the_daemon_shows_nothing_of_it(tmp_path: Path, kind: SandboxKind, daemon: int) -> None:
    shell = _shell(tmp_path, "cat", "sh", kind=kind)

    outputs = [
        await _run(shell, "cat", "/proc/1/environ"),
        await _run(shell, "cat", f"/proc/{daemon}/environ"),
        await _run(shell, "cat", f"/proc/{os.getpid()}/environ"),
        await _run(shell, "sh", "-c", "cat /proc/*/environ; cat /proc/self/environ"),
    ]

    for output in outputs:
        assert SECRET not in output
        assert "ORCHESTRATOR_TEST_BOT_TOKEN" not in output
    assert outputs[1].startswith("exit code: 1\n")  # the daemon's pid is not there to read


async def test_unconfined_none_is_what_the_attack_reads(tmp_path: Path, daemon: int) -> None:
    output = await _run(_shell(tmp_path, "cat", kind="none"), "cat", f"/proc/{daemon}/environ")
    assert SECRET in output


@pytest.mark.parametrize("kind", CONFINED)
async def test_state_databases_beside_the_workspace_are_unreachable(tmp_path: Path, kind: SandboxKind) -> None:
    # The old layout at its worst: a workspace inside state_dir, beside every agent's databases.
    state = tmp_path / "state"
    workspace = state / "workspaces" / "ops"
    workspace.mkdir(parents=True)
    for db in ("sessions.sqlite3-wal", "memory.sqlite3-wal", "audit.sqlite3"):
        (state / db).write_text(f"other agent's transcript {SECRET}")
    shell = _shell(workspace, "cat", "grep", "ls", kind=kind)

    outputs = [
        await _run(shell, "cat", "../../sessions.sqlite3-wal"),
        await _run(shell, "cat", str(state / "memory.sqlite3-wal")),
        await _run(shell, "grep", "-r", "transcript", "../.."),
        await _run(shell, "grep", "-r", "transcript", str(tmp_path)),
        await _run(shell, "ls", "-a", "../.."),
    ]

    for output in outputs:
        assert SECRET not in output
        assert "sqlite3" not in output.split("--- stderr ---")[0]
    assert not outputs[0].startswith("exit code: 0\n")


@pytest.mark.parametrize("kind", CONFINED)
async def test_workspace_is_the_only_writable_place(tmp_path: Path, kind: SandboxKind) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shell = _shell(workspace, "sh", kind=kind)

    await _run(shell, "sh", "-c", f"echo x > {outside}/pwned; echo x > /usr/pwned; echo x > /etc/pwned; echo ok > inside")

    assert not (outside / "pwned").exists() and not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()
    assert (workspace / "inside").read_text() == "ok\n"


@pytest.mark.parametrize("kind", CONFINED)
async def test_setsid_child_is_gone_when_the_call_returns(tmp_path: Path, kind: SandboxKind) -> None:
    # Under Landlock setsid() fails (seccomp), so the fallback runs in the killed process group.
    marker = _marker()
    shell = _shell(tmp_path, "sh", "setsid", kind=kind)

    # output away from the pipes, as a daemonising child does
    quiet = ">/dev/null 2>&1"
    result = await _run(shell, "sh", "-c", f"(setsid sleep {marker} || sleep {marker}) {quiet} & "
                        f"setsid -f sleep {marker} {quiet}; sh -c 'sleep {marker} {quiet} &'; echo started")

    assert "started" in result
    assert await _gone(marker)


async def test_setsid_child_outlives_an_unconfined_call(tmp_path: Path) -> None:
    # The same attack with sandbox = "none": the escape the PID namespace closes.
    marker = _marker()
    await _run(_shell(tmp_path, "sh", kind="none"), "sh", "-c", f"setsid sleep {marker} >/dev/null 2>&1 & sleep 0.3")
    survivors = _host_pids(marker)
    for pid in survivors:
        os.kill(pid, 9)
    assert survivors


@pytest.mark.parametrize("kind", CONFINED)
async def test_setsid_child_is_gone_at_the_timeout(tmp_path: Path, kind: SandboxKind) -> None:
    marker = _marker()
    shell = _shell(tmp_path, "sh", "setsid", kind=kind)
    # a setsid child (or, refused that, a plain one) and a double-forked orphan
    call = asyncio.create_task(_run(shell, "sh", "-c", f"(setsid sleep {marker} || sleep {marker}) & "
                                    f"sh -c 'sleep {marker} &'; wait"))
    for _ in range(200):  # the attack is running on the host ...
        if len(_host_pids(marker)) == 2:
            break
        await asyncio.sleep(0.025)
    assert len(_host_pids(marker)) == 2

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await call

    assert await _gone(marker)  # ... and the timeout took the whole tree with it


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[str]]]:
    """A loopback TCP server on the host that records every connection."""
    seen: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append("connected")
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], seen


def _connect(port: int) -> list[str]:
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    return ["/usr/bin/python3", "-c", code]


@pytest.mark.parametrize("kind", CONFINED)
async def test_network_is_refused_when_network_is_false(
    tmp_path: Path, kind: SandboxKind, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    shell = _shell(tmp_path, "/usr/bin/python3", kind=kind, network=False)

    result = await _run(shell, *_connect(port))

    assert "connected" not in result.split("--- stderr ---")[0]
    assert "Error" in result  # ConnectionRefusedError (own netns) or PermissionError (Landlock)
    assert seen == []


@pytest.mark.parametrize("kind", CONFINED)
async def test_network_true_lets_the_command_connect(
    tmp_path: Path, kind: SandboxKind, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    shell = _shell(tmp_path, "/usr/bin/python3", kind=kind, network=True)

    result = await _run(shell, *_connect(port))

    assert "--- stdout ---\nconnected\n" in result
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == ["connected"]


@pytest.mark.parametrize("kind", [*CONFINED, "none"])
async def test_resource_limits_bind_the_command(tmp_path: Path, kind: SandboxKind) -> None:
    limits = ShellSandbox(requested=kind, kind=kind).limits
    shell = _shell(tmp_path, "sh", kind=kind)

    result = await _run(shell, "sh", "-c", "ulimit -t; ulimit -v")

    assert result.startswith(f"exit code: 0\n--- stdout ---\n{limits.cpu_seconds}\n{limits.address_space_bytes // 1024}\n")


async def test_pid_namespace_shows_only_the_sandbox(tmp_path: Path) -> None:
    result = await _run(_shell(tmp_path, "ls", kind="bwrap"), "ls", "/proc")
    pids = [line for line in result.split("--- stdout ---\n")[1].split("\n--- stderr")[0].splitlines() if line.isdigit()]
    assert str(os.getpid()) not in pids
    assert len(pids) <= 3  # bwrap's init and the command (ls itself)


async def test_no_working_sandbox_refuses_every_command_and_runs_nothing(tmp_path: Path) -> None:
    refused = ShellSandbox(requested="auto", kind=None, reason="no sandbox works here (bwrap: gone)")
    shell = _shell(tmp_path, "sh", kind="none", sandbox=refused)

    with pytest.raises(ToolFailure) as caught:
        await _run(shell, "sh", "-c", "touch ran")

    assert caught.value.reason == "command 'sh' refused: no sandbox works here (bwrap: gone)"
    assert not (tmp_path / "ran").exists()


async def test_a_policy_built_without_a_sandbox_refuses(tmp_path: Path) -> None:
    # Omission is never a grant: a SecurityPolicy nobody resolved a sandbox for runs nothing.
    arguments: dict[str, Any] = dict(
        agent="ops", autonomy="full", workspace=tmp_path, shell_allowed_commands=frozenset({"sh"}),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1,
    )
    shell = BUILTIN_TOOLS["shell"].bind(SecurityPolicy(**arguments))

    with pytest.raises(ToolFailure, match="no sandbox was resolved"):
        await _run(shell, "sh", "-c", "touch ran")
    assert not (tmp_path / "ran").exists()


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    """A listening pathname unix socket outside the workspace, like tmux's or ssh-agent's."""
    folder = tmp_path / "outside"
    folder.mkdir()
    path = folder / "tmux-0.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.setblocking(False)
    try:
        yield path, server
    finally:
        server.close()


def _accepted(server: socket.socket) -> bool:
    # A connect() that succeeded sits in the backlog before the command returns.
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("kind", CONFINED)
async def test_an_abstract_unix_socket_on_the_host_is_unreachable(tmp_path: Path, kind: SandboxKind, network: bool) -> None:
    # Abstract sockets belong to a network namespace: bwrap with network = true shares the host's.
    name = f"\0orchestrator-test-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(4)
    server.setblocking(False)
    code = f"import socket; socket.socket(socket.AF_UNIX).connect({name!r}); print('connected')"
    try:
        result = await _run(_shell(tmp_path, "/usr/bin/python3", kind=kind, network=network),
                            "/usr/bin/python3", "-c", code)
        reached = _accepted(server)
    finally:
        server.close()

    assert not reached
    assert "connected" not in result.split("--- stderr ---")[0]


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("kind", CONFINED)
async def test_a_pathname_unix_socket_outside_the_workspace_is_unreachable(
    tmp_path: Path, kind: SandboxKind, network: bool, unix_listener: tuple[Path, socket.socket]
) -> None:
    path, server = unix_listener
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); print('connected')")
    shell = _shell(workspace, "/usr/bin/python3", kind=kind, network=network)

    result = await _run(shell, "/usr/bin/python3", "-c", code)

    assert "connected" not in result.split("--- stderr ---")[0]
    assert "Error" in result  # PermissionError (seccomp) or FileNotFoundError (not in bwrap's mounts)
    assert not _accepted(server)


async def test_the_unix_socket_attack_reaches_the_socket_unconfined(
    tmp_path: Path, unix_listener: tuple[Path, socket.socket]
) -> None:
    path, server = unix_listener
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); print('connected')"
    result = await _run(_shell(tmp_path, "/usr/bin/python3", kind="none"), "/usr/bin/python3", "-c", code)
    assert "--- stdout ---\nconnected\n" in result
    assert _accepted(server)


@pytest.mark.parametrize("kind", CONFINED)
async def test_udp_does_not_leave_with_network_false(tmp_path: Path, kind: SandboxKind) -> None:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.setblocking(False)
    port = receiver.getsockname()[1]
    code = (f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}));"
            " print('sent')")
    try:
        result = await _run(_shell(tmp_path, "/usr/bin/python3", kind=kind), "/usr/bin/python3", "-c", code)
        # loopback delivers during sendto(): a datagram sent is queued before the command returns
        with pytest.raises(BlockingIOError):
            receiver.recv(16)
    finally:
        receiver.close()
    if kind == "landlock":  # bwrap's command sends into its own network namespace's loopback
        assert "PermissionError" in result and "sent" not in result.split("--- stderr ---")[0]


async def test_io_uring_is_refused_under_landlock(tmp_path: Path) -> None:
    # io_uring's IORING_OP_SOCKET/CONNECT would bypass the socket(2) filter: no ring at all.
    code = ("import ctypes, os; p = ctypes.create_string_buffer(120); libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.syscall(425, 4, p); print('ring', r, os.strerror(ctypes.get_errno()))")
    result = await _run(_shell(tmp_path, "/usr/bin/python3", kind="landlock"), "/usr/bin/python3", "-c", code)
    assert "ring -1 Operation not permitted" in result


async def test_the_x32_abi_is_refused_under_landlock(tmp_path: Path) -> None:
    # x32 numbers (bit 30 set) are another table: a filter matching x86_64 numbers alone misses them.
    code = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.syscall(0x40000000 | 39); print('x32', r, os.strerror(ctypes.get_errno()))")
    result = await _run(_shell(tmp_path, "/usr/bin/python3", kind="landlock"), "/usr/bin/python3", "-c", code)
    # (x32 exists on x86_64 only; elsewhere the number is simply no call)
    assert ("x32 -1 Operation not permitted" if os.uname().machine == "x86_64" else "x32 -1 ") in result
