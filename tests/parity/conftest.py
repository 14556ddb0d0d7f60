"""The distinctive multi-agent config every parity test drives through every path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.config import Config
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI


def parity_toml(base_url: str) -> str:
    """Return a config whose two agents differ in every setting the seam resolves."""
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[peripherals.arm]
port = "/dev/orchestrator-parity-arm"
commands = ["status", "move"]
read_only_commands = ["status"]

[agents.ops]
provider = "fake"
model = "ops-model"
temperature = 0.3
system_prompt = "You are ops."
autonomy = "supervised"
tools = ["file_*", "list_dir", "shell"]
excluded_tools = ["file_write"]
peripherals = ["arm"]

[agents.ops.approval]
auto_approve = ["list_dir", "file_read"]
always_ask = ["shell"]
timeout_s = 7

[agents.ops.budget]
max_tool_iterations = 7
turn_timeout_s = 123
tool_timeout_s = 11
max_tool_result_chars = 4321
max_history_messages = 17
max_actions_per_hour = 55
max_tokens_per_turn = 54321
max_tokens_per_day = 987654

[agents.ops.memory]
scope = "agent"
read_from = ["intern"]

[agents.ops.shell]
allowed_commands = ["echo"]

[agents.intern]
provider = "fake"
model = "intern-model"
temperature = 0.9
system_prompt = "You are the intern."
autonomy = "read_only"
tools = ["*"]
excluded_tools = ["http_fetch"]
peripherals = ["arm"]
"""


@pytest.fixture
def parity_config(write_config: WriteConfig) -> Callable[[FakeOpenAI], tuple[Path, Config]]:
    """Return a function writing the parity config for a fake LLM and loading it."""

    def make(fake: FakeOpenAI) -> tuple[Path, Config]:
        path = write_config(parity_toml(fake.base_url))
        return path, load_config(path)

    return make
