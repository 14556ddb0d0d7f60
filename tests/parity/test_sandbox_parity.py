"""`[agents.X.shell] sandbox`: one resolved sandbox on every construction path, enforced on each."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.peripherals import PeripheralPool
from orchestrator.seam import Services
from orchestrator.seam.matrix import COLUMNS, agent_matrix, matrix_columns
from orchestrator.seam.execution import RuntimeKnobs
from tests.conftest import WriteConfig
from tests.parity.conftest import parity_toml

SECRET = "sentinel-slack-token-77aa"


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
