"""`[agents.X.shell]` limits, attacked through `shell` on the real sandboxes: the host stays bounded."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.policy import SandboxKind, SandboxLimits, SecurityPolicy, ShellSandbox
from orchestrator.tools import BUILTIN_TOOLS, Tool

ROOT = Path(__file__).resolve().parents[2]
CONFINED: list[SandboxKind] = ["bwrap", "landlock"]
MIB = 1024**2
# The kernel never applies RLIMIT_NPROC to root: the runner drops to nobody, as the daemon
# runs under systemd's DynamicUser.
NOBODY = ("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
RUNNER = """
import asyncio, sys
from pathlib import Path
from orchestrator.policy import SandboxLimits, SecurityPolicy, ShellSandbox
from orchestrator.tools import run_command
kind, workspace, code = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
policy = SecurityPolicy(
    agent="ops", autonomy="full", workspace=workspace, shell_allowed_commands=frozenset({"/usr/bin/python3"}),
    http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1,
    shell_sandbox=ShellSandbox(requested=kind, kind=kind, limits=SandboxLimits(processes=20)),
)
print(asyncio.run(run_command(["/usr/bin/python3", "-c", code], policy, tool="shell")))
"""
# 60 forks that each sleep: how many the kernel let start, how many it refused
FORK_BOMB = """
import os, time
started = refused = 0
for _ in range(60):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started += 1
print("started", started, "refused", refused)
"""


def _shell(workspace: Path, *allowed: str, kind: SandboxKind, limits: SandboxLimits = SandboxLimits(),
           workspace_max_bytes: int | None = None) -> Tool:
    policy = SecurityPolicy(
        agent="ops", autonomy="full", workspace=workspace.resolve(), shell_allowed_commands=frozenset(allowed),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1,
        shell_sandbox=ShellSandbox(requested=kind, kind=kind, limits=limits),
        workspace_max_bytes=workspace_max_bytes,
    )
    return BUILTIN_TOOLS["shell"].bind(policy)


@pytest.fixture
def shared_workspace() -> Iterator[Path]:
    """A workspace the unprivileged runner can write (pytest's tmp_path is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="orchestrator-limits-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("kind", CONFINED)
async def test_a_fork_bomb_stops_at_max_processes(shared_workspace: Path, kind: SandboxKind) -> None:
    drop = NOBODY if os.getuid() == 0 else ()
    runner = await asyncio.create_subprocess_exec(
        *drop, sys.executable, "-c", RUNNER, kind, str(shared_workspace), FORK_BOMB,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = await runner.communicate()

    assert runner.returncode == 0, err.decode()
    words = out.decode().split("--- stdout ---\n")[1].split()
    started, refused = int(words[1]), int(words[3])
    assert 0 < started < 20 and started + refused == 60  # the bomb and its parent fit in 20


async def test_a_big_tmp_write_stops_at_tmp_mb_under_bwrap(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "dd", kind="bwrap", limits=SandboxLimits(tmp_bytes=2 * MIB))

    result = await shell.invoke({"argv": ["dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=8"]})

    assert result.startswith("exit code: 1\n")
    assert "No space left on device" in result


async def test_a_workspace_over_workspace_max_refuses_the_next_command(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "dd", "true", kind="landlock", workspace_max_bytes=2 * MIB)
    await shell.invoke({"argv": ["true"]})  # under the limit: runs

    wrote = await shell.invoke({"argv": ["dd", "if=/dev/urandom", "of=fill", "bs=1M", "count=3"]})
    with pytest.raises(ToolFailure) as caught:
        await shell.invoke({"argv": ["true"]})
    (tmp_path / "fill").unlink()
    again = await shell.invoke({"argv": ["true"]})

    assert wrote.startswith("exit code: 0\n")
    assert caught.value.reason.startswith("command 'true' refused: the workspace takes 3.0 MiB, over its limit of 2 MiB")
    assert again.startswith("exit code: 0\n")


async def test_output_is_kept_up_to_max_output(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "head", kind="landlock", limits=SandboxLimits(output_bytes=1024))

    result = await shell.invoke({"argv": ["head", "-c", "5000", "/dev/zero"]})

    assert result.count("\0") == 1024
    assert "[... 3976 more bytes not shown]" in result
