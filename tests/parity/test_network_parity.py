"""[http_fetch] limits are the same on every construction path: no hosts = no host, anywhere."""

from __future__ import annotations

import asyncio
import json

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.errors import ToolFailure
from orchestrator.seam import Services
from orchestrator.seam.matrix import COLUMNS, matrix_columns, settings_of
from orchestrator.seam.execution import RuntimeKnobs
from tests.conftest import WriteConfig

CONFIG = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"

[agents.net]
provider = "p"
model = "m"
autonomy = "read_only"
tools = ["http_fetch", "list_dir"]

[agents.net.http_fetch]
allowed_hosts = ["docs.example.com"]
allow_private_addresses = true
max_bytes = 4096

[[schedules]]
name = "n"
agent = "net"
cron = "0 0 1 1 *"
prompt = "go"
"""


async def test_every_path_refuses_a_host_outside_the_allowed_hosts(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # the attack: a prompt-injected model on any surface fetches a host the agent was never given
    path = write_config(CONFIG)
    config = load_config(path)
    ceiling = RuntimeKnobs(
        max_tool_iterations=1, turn_timeout_s=1, tool_timeout_s=1, max_tool_result_chars=100,
        max_history_messages=1, max_actions_per_hour=1, max_tokens_per_turn=1, max_tokens_per_day=1,
    )
    services = dict.fromkeys(COLUMNS, Services())  # one for every column: http_fetch needs none
    _, columns = matrix_columns(config, "net", services, parent="net", ceiling=ceiling, schedule_tools=None)

    refusals = {}
    for column in columns:
        tool = column.execution.tools.get("http_fetch")
        assert tool is not None, column.label
        with pytest.raises(ToolFailure) as caught:
            await tool.invoke({"url": "http://127.0.0.1:9/"})
        refusals[column.label] = caught.value.reason
        assert settings_of(column.execution, ())["network"] == [
            "host:docs.example.com", "private_addresses:allowed", "max_bytes:4096"
        ]

    assert len(columns) == 10
    assert set(refusals.values()) == {
        "refused 'http://127.0.0.1:9/': host '127.0.0.1' is not in the allowed hosts (docs.example.com)"
    }
    argv = ["policy", "matrix", "--json", "--agent", "net", "--config", str(path)]
    assert await asyncio.to_thread(cli.main, argv) == 0
    grid = json.loads(capsys.readouterr().out)
    assert set(grid["agents"]["net"]["network"].values()) == {"enforced"} and grid["gaps"] == []
