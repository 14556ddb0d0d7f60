"""A stdio server that writes junk to its protocol stream costs one log line per connection,
not a traceback per junk line, and its tools keep working."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

import pytest

from orchestrator.config import Config
from orchestrator.logs import configure_logging
from tests.conftest import provider_toml
from tests.mcp.kit import agent_toml, bundle, execution, mcp_services, stdio_kit

pytestmark = pytest.mark.slow


async def test_a_noisy_server_is_logged_once_and_still_serves(load: Callable[..., Config]) -> None:
    log = io.StringIO()
    configure_logging(level="INFO", fmt="text", sink=log)  # the daemon's sinks, stdlib bridge included
    config = load(
        provider_toml("http://127.0.0.1:9/v1") + stdio_kit(junk=100)
        + bundle("b", servers={"kit": ["echo"]}) + agent_toml("a", bundles=["b"])
    )
    async with mcp_services(config, "a") as services:
        tool = execution(config, services, "a").tools.get("kit__echo")
        assert tool is not None
        await asyncio.sleep(1.5)  # the junk arrives while the session is up
        assert await tool.invoke({"text": "still here"}) == "still here"
    text = log.getvalue()
    print(text)
    assert text.count("wrote output that is not MCP (") == 1
    assert "Traceback" not in text and "Failed to parse" not in text
    assert len(text) < 4_000
