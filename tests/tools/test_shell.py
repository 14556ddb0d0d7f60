"""shell runs only allow-listed commands, in the workspace, and never outlives its call.

The sandbox itself is attacked in test_sandbox.py; here every kind keeps the runner's contract.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.policy import SandboxKind, SecurityPolicy, ShellSandbox
from orchestrator.tools import BUILTIN_TOOLS, Tool


def _shell(workspace: Path, *allowed: str, kind: SandboxKind = "bwrap") -> Tool:
    policy = SecurityPolicy(
        agent="ops",
        autonomy="full",
        workspace=workspace,
        shell_allowed_commands=frozenset(allowed),
        http_allowed_hosts=(),
        http_allow_private_addresses=False,
        http_max_bytes=1024,
        shell_sandbox=ShellSandbox(requested=kind, kind=kind),
    )
    return BUILTIN_TOOLS["shell"].bind(policy)


async def _failure(tool: Tool, arguments: dict[str, Any]) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        await tool.invoke(arguments)
    assert caught.value.tool == "shell"
    return caught.value


def _alive(pid: int) -> bool:
    """Return whether `pid` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _pid_from(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} was never written")


async def test_reports_exit_code_stdout_and_stderr(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "sh")

    result = await shell.invoke({"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]})

    assert result == "exit code: 3\n--- stdout ---\nout\n\n--- stderr ---\nerr\n"


async def test_runs_in_the_workspace_with_home_there(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "sh")

    result = await shell.invoke({"argv": ["sh", "-c", 'pwd; echo "home=$HOME"']})

    assert result.startswith("exit code: 0\n")
    assert f"{tmp_path.resolve()}\n" in result
    assert f"home={tmp_path}\n" in result


async def test_arguments_are_not_shell_parsed(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "echo")

    result = await shell.invoke({"argv": ["echo", "$HOME; touch pwned", "`id`"]})

    assert "$HOME; touch pwned `id`" in result
    assert not (tmp_path / "pwned").exists()


async def test_command_outside_allowlist_is_refused_naming_the_allowed(tmp_path: Path) -> None:
    failure = await _failure(_shell(tmp_path, "ls", "git"), {"argv": ["rm", "-rf", "."]})

    assert "'rm' refused" in failure.reason
    assert "git, ls" in failure.reason


async def test_empty_allowlist_refuses_everything(tmp_path: Path) -> None:
    failure = await _failure(_shell(tmp_path), {"argv": ["ls"]})
    assert "no commands are allowed" in failure.reason


@pytest.mark.parametrize("argv0", ["/bin/ls", "./ls", "bin/ls", "ls "])
async def test_path_qualified_command_is_refused_even_if_bare_name_is_allowed(
    tmp_path: Path, argv0: str
) -> None:
    failure = await _failure(_shell(tmp_path, "ls"), {"argv": [argv0]})
    assert f"{argv0!r} refused" in failure.reason


async def test_exactly_allowed_path_qualified_command_runs(tmp_path: Path) -> None:
    result = await _shell(tmp_path, "/bin/echo").invoke({"argv": ["/bin/echo", "hi"]})
    assert result.startswith("exit code: 0\n--- stdout ---\nhi\n")


async def test_binary_planted_in_workspace_is_not_found_by_bare_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted-tool"
    planted.write_text("#!/bin/sh\necho planted\n")
    planted.chmod(0o755)

    failure = await _failure(_shell(tmp_path, "planted-tool"), {"argv": ["planted-tool"]})

    assert "command not found" in failure.reason


async def test_daemon_environment_does_not_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_TEST_SECRET", "hunter2")

    result = await _shell(tmp_path, "env").invoke({"argv": ["env"]})

    assert "hunter2" not in result
    assert "ORCHESTRATOR_TEST_SECRET" not in result
    assert f"HOME={tmp_path}\n" in result
    assert "PATH=" in result


# `$$` is the host pid only outside a PID namespace; bwrap's own kill test scans the host.
@pytest.mark.parametrize("kind", ["landlock", "none"])
async def test_timeout_kills_and_reaps_the_child(tmp_path: Path, kind: SandboxKind) -> None:
    shell = _shell(tmp_path, "sh", kind=kind)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await shell.invoke({"argv": ["sh", "-c", "echo $$ > pid; exec sleep 10"]})

    assert not _alive(await _pid_from(tmp_path / "pid"))


# `$$` is the host pid only outside a PID namespace; bwrap's own kill test scans the host.
@pytest.mark.parametrize("kind", ["landlock", "none"])
async def test_timeout_kills_background_grandchildren(tmp_path: Path, kind: SandboxKind) -> None:
    shell = _shell(tmp_path, "sh", kind=kind)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await shell.invoke({"argv": ["sh", "-c", "sleep 10 & echo $! > pid; wait"]})

    pid = await _pid_from(tmp_path / "pid")
    for _ in range(100):
        if not _alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not _alive(pid)


# `$$` is the host pid only outside a PID namespace; bwrap's own kill test scans the host.
@pytest.mark.parametrize("kind", ["landlock", "none"])
async def test_timeout_cleans_up_a_command_flooding_its_output(tmp_path: Path, kind: SandboxKind) -> None:
    shell = _shell(tmp_path, "sh", kind=kind)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await shell.invoke({"argv": ["sh", "-c", "echo $$ > pid; exec yes flood"]})

    assert not _alive(await _pid_from(tmp_path / "pid"))


async def test_cancellation_propagates(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "sleep")
    task = asyncio.create_task(shell.invoke({"argv": ["sleep", "10"]}))
    await asyncio.sleep(0.1)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_background_child_does_not_hold_the_call_open(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "sh")
    started = time.monotonic()

    result = await shell.invoke({"argv": ["sh", "-c", "sleep 10 & echo started"]})

    assert time.monotonic() - started < 5
    assert "started" in result


async def test_large_output_is_truncated(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "head")

    result = await shell.invoke({"argv": ["head", "-c", "200000", "/dev/zero"]})

    assert result.startswith("exit code: 0\n")
    assert "more bytes not shown" in result
    assert len(result) < 100_000


async def test_missing_command_is_a_clear_failure(tmp_path: Path) -> None:
    name = "definitely-not-a-command-xyz"
    failure = await _failure(_shell(tmp_path, name), {"argv": [name]})
    assert "command not found" in failure.reason


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "missing required argument 'argv'"),
        ({"argv": "ls -l"}, "must be an array of strings"),
        ({"argv": []}, "must name a command"),
        ({"argv": ["ls", 3]}, "argv[1] must be a string"),
        ({"argv": ["ls"], "cwd": "/"}, "unexpected argument(s): cwd"),
    ],
)
async def test_bad_arguments_are_tool_failures(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    failure = await _failure(_shell(tmp_path, "ls"), arguments)
    assert expected in failure.reason
