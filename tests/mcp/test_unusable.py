"""Tools a server offers that no model can use (a name that is not a function name, a tool that
runs only as an MCP task) are never offered, are logged once per listing, and fail `check
--connect` only when a bundle grants them."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from loguru import logger

from orchestrator import cli
from orchestrator.config import Config
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.mcp.kit import ROOT, agent_toml, bundle, execution, mcp_services, tool_results, turn

pytestmark = pytest.mark.slow

ODD = (
    "[mcp.servers.odd]\ntransport = \"stdio\"\n"
    f"command = {json.dumps(sys.executable)}\nargs = [\"-m\", \"tests.fakes.mcp_servers.odd\"]\n"
    f"cwd = {json.dumps(str(ROOT))}\n"
)
BAD_NAME = "'odd__bad name!' is not a valid function name (letters, digits, '_' and '-', at most 64)"
TASK_ONLY = 'it runs only as an MCP task (execution.taskSupport = "required"), which is not supported yet'


async def test_check_connect_warns_about_unusable_tools_nobody_grants(
    write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI(models=("m-a",)) as llm:
        path = write_config(
            provider_toml(llm.base_url) + ODD + bundle("b", servers={"odd": ["fine"]}) + agent_toml("a", bundles=["b"])
        )
        assert await asyncio.to_thread(cli.main, ["check", "--connect", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"warning: {path}: mcp.servers.odd: tool 'bad name!' cannot be offered: {BAD_NAME}",
        f"warning: {path}: mcp.servers.odd: tool 'job' cannot be offered: {TASK_ONLY}",
    ]


async def test_check_connect_fails_when_a_bundle_grants_an_unusable_tool(
    write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI(models=("m-a",)) as llm:
        path = write_config(
            provider_toml(llm.base_url) + ODD + bundle("b", servers={"odd": ["fine", "j*"]})
            + agent_toml("a", bundles=["b"])
        )
        assert await asyncio.to_thread(cli.main, ["check", "--connect", "--config", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: {path}: mcp.servers.odd: tool 'bad name!' cannot be offered: {BAD_NAME}",
        f"{path}: mcp.servers.odd: tool 'job' cannot be offered: {TASK_ONLY}",
    ]


async def test_unusable_tools_are_never_offered_and_logged_once_per_listing(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = load(provider_toml(fake_llm.base_url) + ODD + bundle("b", servers={"odd": ["*"]}) + agent_toml("a", bundles=["b"]))
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        async with mcp_services(config, "a") as services:
            assert execution(config, services, "a").tools.names == ("odd__counts", "odd__fine")
            fake_llm.script(tool_call("odd__job", {}), text("one"), tool_call("odd__counts", {}), text("two"))
            await turn(config, services, "a")
            await turn(config, services, "a")
    finally:
        logger.remove(sink)
    refused, counted = (tool_results(r)[0] for r in (fake_llm.requests[1], fake_llm.requests[3]))
    assert refused == "Error: tool 'odd__job' is not available to this agent. It was not run."
    assert "job" not in counted  # the server never ran it
    assert sum("is not offered" in line for line in lines) == 2  # one per tool, not one per turn
    assert all(tool["function"]["name"] != "odd__job" for tool in fake_llm.requests[0]["tools"])
