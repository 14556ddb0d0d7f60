"""Gateway test kit: a config with a `[gateway]`, and a Runtime serving it on 127.0.0.1:0."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.checks import load_config
from orchestrator.gateway import GatewayAddress, open_gateway
from orchestrator.daemon import Runtime
from tests.mcp.kit import bundle, stdio_kit

TOKEN = "s3cret-gateway-token-for-the-tests-0123"


def gateway_toml(base_url: str, *, mcp: bool = False, gateway: str = 'port = 0\ntoken = "file:gateway.token"\n') -> str:
    """Return a config with two agents (one with a deferred MCP bundle when `mcp`) and a gateway."""
    mcp_part = stdio_kit("kit") + bundle("lazy", servers={"kit": ["echo", "env_value", "write_note"]}, mode="deferred")
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[gateway]
{gateway}
[peripherals.arm]
port = "/dev/orchestrator-gateway-test-arm"
commands = ["status"]
read_only_commands = ["status"]

{mcp_part if mcp else ""}
[agents.ops]
provider = "fake"
model = "ops-model"
temperature = 0.2
system_prompt = "You are ops."
autonomy = "supervised"
tools = ["file_read", "list_dir", "shell"]
peripherals = ["arm"]
{'mcp_bundles = ["lazy"]' if mcp else ""}
{'excluded_tools = ["kit__write_note"]' if mcp else ""}

[agents.ops.approval]
auto_approve = ["file_read", "list_dir"]
always_ask = ["shell"]

[agents.ops.budget]
max_tool_iterations = 4
max_history_messages = 12

[agents.ops.shell]
allowed_commands = ["echo"]

[agents.intern]
provider = "fake"
model = "intern-model"
autonomy = "read_only"
tools = ["*"]

[agents.intern.http_fetch]
allowed_hosts = ["docs.example.com"]
"""


def write(tmp_path: Path, text: str) -> Path:
    """Write the config and the token file next to it; return the config path."""
    (tmp_path / "gateway.token").write_text(TOKEN + "\n", encoding="utf-8")
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[tuple[Runtime, GatewayAddress]]:
    """Open a Runtime on the config with its gateway listening."""
    config = load_config(path)
    async with Runtime.open(config, config_path=path) as runtime, open_gateway(runtime) as address:
        assert address is not None
        await asyncio.wait_for(runtime.mcp_settled.wait(), 30)  # the daemon serves meanwhile; tests wait
        yield runtime, address


AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def call(
    address: GatewayAddress, method: str, path: str, *, headers: dict[str, str] | None = None, **kwargs: Any
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Make one real HTTP request; return (status, JSON body, headers)."""
    async with aiohttp.ClientSession() as session:
        async with session.request(method, address.url + path, headers=AUTH if headers is None else headers, **kwargs) as r:
            return r.status, await r.json(), dict(r.headers)
