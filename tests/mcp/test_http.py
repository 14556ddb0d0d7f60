"""The same scope and fault guarantees over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from loguru import logger

from orchestrator.config import Config
from orchestrator.errors import ToolFailure
from orchestrator.mcp import ConnectionState
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.mcp.kit import (
    HttpKit,
    agent_toml,
    bundle,
    execution,
    free_port,
    http_kit,
    mcp_services,
    pool_of,
    sent_tools,
    server_counts,
    tool_results,
    turn,
    wait_for,
)

pytestmark = pytest.mark.slow


async def test_two_agents_over_http_see_and_run_only_their_own_tools(
    fake_llm: FakeOpenAI, load: Callable[..., Config], http_kit_server: HttpKit,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORCH_TEST_WEB_AUTH", "Bearer s3cret")
    config = load(
        provider_toml(fake_llm.base_url)
        + http_kit("web", http_kit_server.url, headers={"Authorization": "env:ORCH_TEST_WEB_AUTH"})
        + bundle("notes", servers={"web": ["echo", "header_*"]})
        + bundle("ops", servers={"web": ["secret_op"]})
        + agent_toml("alpha", bundles=["notes"])
        + agent_toml("beta", bundles=["ops"])
    )
    async with mcp_services(config, "alpha", "beta") as services:
        before = await server_counts(services, "web")
        assert execution(config, services, "alpha").tools.names == ("web__echo", "web__header_value")
        assert execution(config, services, "beta").tools.names == ("web__secret_op",)
        fake_llm.script(
            tool_calls(("web__secret_op", {"target": "prod"}), ("web__header_value", {"name": "Authorization"})),
            text("alpha done"),
            tool_call("web__secret_op", {"target": "staging"}),
            text("beta done"),
        )
        first = await turn(config, services, "alpha")
        second = await turn(config, services, "beta")
        after = await server_counts(services, "web")
    assert first.executed == ("web__header_value",) and second.executed == ("web__secret_op",)
    refused, header = tool_results(fake_llm.requests[1])
    assert refused == "Error: tool 'web__secret_op' is not available to this agent. It was not run."
    # the header's secret reference was resolved at connect: the server echoed the resolved
    # value, which reaches the model only redacted (the reference itself would pass as it is)
    assert "\n[redacted]\n" in header and "s3cret" not in header
    assert sent_tools(fake_llm.requests[0]) == ["web__echo", "web__header_value"]
    assert after.get("secret_op", 0) - before.get("secret_op", 0) == 1  # beta's call only


async def test_an_http_server_that_dies_mid_call_is_reconnected_once_it_is_back(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    server = HttpKit(free_port(), tmp_path / "server.log")
    server.start()
    try:
        config = load(
            provider_toml("http://127.0.0.1:9/v1")
            + http_kit("web", server.url, ready_wait_s=0.5)
            + bundle("b", servers={"web": ["pid", "crash"]})
            + agent_toml("a", bundles=["b"])
        )
        async with mcp_services(config, "a") as services:
            pool = pool_of(services)
            tools = execution(config, services, "a").tools
            pid_tool, crash_tool = tools.get("web__pid"), tools.get("web__crash")
            assert pid_tool is not None and crash_tool is not None
            first = await pid_tool.invoke({})
            with pytest.raises(ToolFailure) as crashed:
                await crash_tool.invoke({})
            assert crashed.value.reason.startswith("the connection to MCP server 'web' was lost")
            server.wait_exited()
            with pytest.raises(ToolFailure, match=r"MCP server 'web' is down .*\(waited 0.5s, its ready_wait_s\)"):
                await pid_tool.invoke({})  # nothing listens: a clear error after the stated wait, not a hang
            server.start()
            await wait_for(lambda: [s.state for s in pool.status()] == [ConnectionState.READY])
            second = await pid_tool.invoke({})
        assert first != second
    finally:
        server.stop()


async def test_a_call_while_its_http_server_is_down_waits_for_it_and_runs_once_it_is_back(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    server = HttpKit(free_port(), tmp_path / "server.log")
    server.start()
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m.record["message"])), level="WARNING")
    try:
        config = load(
            provider_toml("http://127.0.0.1:9/v1")
            + http_kit("web", server.url, ready_wait_s=30)
            + bundle("b", servers={"web": ["pid", "crash"]})
            + agent_toml("a", bundles=["b"])
        )
        async with mcp_services(config, "a") as services:
            tools = execution(config, services, "a").tools
            pid_tool, crash_tool = tools.get("web__pid"), tools.get("web__crash")
            assert pid_tool is not None and crash_tool is not None
            first = await pid_tool.invoke({})
            with pytest.raises(ToolFailure):
                await crash_tool.invoke({})
            server.wait_exited()
            async with asyncio.TaskGroup() as group:
                call = group.create_task(pid_tool.invoke({}))  # arrives while the server is down
                seen = len(lines)
                # reconnect attempts fail while it waits (before, the first one failed the call)
                await wait_for(lambda: sum("reconnecting in" in line for line in lines[seen:]) >= 2, timeout=20)
                assert not call.done()
                server.start()
            second = call.result()
        assert second != first  # run by the server that came back
    finally:
        logger.remove(sink)
        server.stop()
