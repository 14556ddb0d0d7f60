"""`[agents.X.shell] sandbox`: one resolved sandbox on every construction path, enforced on each."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.peripherals import PeripheralPool
from orchestrator.policy import SandboxLimits
from orchestrator.seam import Services
from orchestrator.seam.matrix import COLUMNS, agent_matrix, matrix_columns
from orchestrator.seam.execution import RuntimeKnobs
from tests.conftest import WriteConfig
from tests.parity.conftest import parity_toml

SECRET = "sentinel-slack-token-77aa"
MIB = 1024**2


@pytest.fixture
def daemon() -> Iterator[int]:
    """A process started with a token in its environment, standing for the daemon."""
    process = subprocess.Popen(["sleep", "60"], env={**os.environ, "ORCHESTRATOR_SLACK_TOKEN": SECRET})
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


async def test_every_path_runs_shell_in_the_same_sandbox(
    write_config: WriteConfig, daemon: int, tmp_path: Path
) -> None:
    toml = parity_toml("http://127.0.0.1:9/v1").replace(
        'allowed_commands = ["echo"]', 'allowed_commands = ["echo", "cat"]\nsandbox = "landlock"'
    )
    config = load_config(write_config(toml))
    services = dict.fromkeys(COLUMNS, Services(peripherals=PeripheralPool()))  # shell needs no service
    ceiling = RuntimeKnobs(max_tool_iterations=5, turn_timeout_s=60, tool_timeout_s=60, max_tool_result_chars=9999,
                           max_history_messages=99, max_actions_per_hour=99, max_tokens_per_turn=99,
                           max_tokens_per_day=99)

    baseline, columns = matrix_columns(config, "ops", services, parent="ops", ceiling=ceiling, schedule_tools=None)

    assert baseline.security.shell_sandbox.kind == "landlock"
    ran = []
    for column in columns:
        assert column.execution.security.shell_sandbox == baseline.security.shell_sandbox, column.label
        assert column.execution.security.workspace == baseline.security.workspace, column.label
        shell = column.execution.tools.get("shell")
        if shell is None:
            continue
        result = await shell.invoke({"argv": ["cat", f"/proc/{daemon}/environ"]})
        assert SECRET not in result and "Permission denied" in result, column.label
        ran.append(column.label)
    assert {"channel", "cli_run", "gateway_chat", "delegate", "sop_step", "acp", "schedule"} <= set(ran)
    for agent in ("ops", "intern"):
        grid = await agent_matrix(config, agent, state_dir=tmp_path / f"matrix-{agent}")
        assert set(grid["shell_sandbox"].values()) == {"enforced"}


async def test_every_path_runs_shell_under_the_written_limits(write_config: WriteConfig, tmp_path: Path) -> None:
    toml = parity_toml("http://127.0.0.1:9/v1").replace(
        'allowed_commands = ["echo"]',
        'allowed_commands = ["echo", "sh"]\nsandbox = "landlock"\ncpu_seconds = 7\nmemory_mb = 300\n'
        "file_size_mb = 3\ntmp_mb = 5\nmax_processes = 40\nmax_output_kb = 2",
    ).replace('model = "ops-model"', 'model = "ops-model"\nworkspace_max_mb = 9')
    config = load_config(write_config(toml))
    services = dict.fromkeys(COLUMNS, Services(peripherals=PeripheralPool()))
    ceiling = RuntimeKnobs(max_tool_iterations=5, turn_timeout_s=60, tool_timeout_s=60, max_tool_result_chars=9999,
                           max_history_messages=99, max_actions_per_hour=99, max_tokens_per_turn=99,
                           max_tokens_per_day=99)
    written = SandboxLimits(cpu_seconds=7, address_space_bytes=300 * MIB, file_size_bytes=3 * MIB, tmp_bytes=5 * MIB,
                            processes=40, output_bytes=2048)

    baseline, columns = matrix_columns(config, "ops", services, parent="ops", ceiling=ceiling, schedule_tools=None)

    assert baseline.security.shell_sandbox.limits == written
    ran = []
    for column in columns:
        security = column.execution.security
        assert (security.shell_sandbox.limits, security.workspace_max_bytes) == (written, 9 * MIB), column.label
        shell = column.execution.tools.get("shell")
        if shell is None:
            continue
        result = await shell.invoke({"argv": ["sh", "-c", "ulimit -t; ulimit -v; ulimit -f; head -c 3000 /dev/zero"]})
        # ulimit -f counts 512-byte blocks in dash
        assert result.startswith(f"exit code: 0\n--- stdout ---\n7\n{300 * 1024}\n{3 * MIB // 512}\n"), column.label
        assert "[... 966 more bytes not shown]" in result, column.label  # 3014 bytes, 2048 kept
        ran.append(column.label)
    assert {"channel", "cli_run", "gateway_chat", "delegate", "sop_step", "acp", "schedule"} <= set(ran)
    grid = await agent_matrix(config, "ops", state_dir=tmp_path / "matrix-ops")
    assert set(grid["shell_sandbox"].values()) == {"enforced"}
