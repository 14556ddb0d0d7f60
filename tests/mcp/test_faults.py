"""Faults stay one call's tool error: crash mid-call, hang past the timeout, garbage, no start."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from loguru import logger

from orchestrator.config import Config
from orchestrator.mcp import ConnectionState, McpPool, McpServerUnavailable
from orchestrator.seam import Services
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.mcp.kit import (
    FAST_BACKOFF,
    agent_toml,
    bundle,
    mcp_services,
    pool_of,
    server_counts,
    stdio_kit,
    tool_results,
    turn,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def warnings_logged() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m.record["message"])), level="WARNING")
    yield lines
    logger.remove(sink)


def faulty(fake: FakeOpenAI, load: Callable[..., Config], spawn_log: Path, timeout: float = 15.0) -> Config:
    return load(
        provider_toml(fake.base_url)
        + stdio_kit(spawn_log=spawn_log, tool_timeout_s=timeout)
        + bundle("b", servers={"kit": ["crash", "pid", "hang", "garbage", "echo"]})
        + agent_toml("a", bundles=["b"])
    )


async def test_crash_mid_call_fails_that_call_and_the_next_call_runs_on_a_restarted_server(
    fake_llm: FakeOpenAI, load: Callable[..., Config], tmp_path: Path, warnings_logged: list[str]
) -> None:
    spawns = tmp_path / "spawns"
    config = faulty(fake_llm, load, spawns)
    async with mcp_services(config, "a") as services:
        fake_llm.script(
            tool_call("kit__pid", {}), tool_call("kit__crash", {}), tool_call("kit__pid", {}), text("done")
        )
        result = await turn(config, services, "a")
    assert result.executed == ("kit__pid", "kit__crash", "kit__pid")
    first, crashed, second = (r.split("\n")[1] if r.startswith("<") else r for r in tool_results(fake_llm.requests[3]))
    assert crashed == (
        "Error: the connection to MCP server 'kit' was lost during the call; it is being restarted"
    )
    assert spawns.read_text().split() == [first, second] and first != second
    assert any("connection lost during kit__crash" in line for line in warnings_logged)


async def test_hang_past_the_timeout_fails_that_call_and_the_next_call_works(
    fake_llm: FakeOpenAI, load: Callable[..., Config], tmp_path: Path, warnings_logged: list[str]
) -> None:
    spawns = tmp_path / "spawns"
    config = faulty(fake_llm, load, spawns, timeout=0.5)
    async with mcp_services(config, "a") as services:
        fake_llm.script(
            tool_call("kit__hang", {"seconds": 30}), tool_call("kit__echo", {"text": "still here"}), text("ok")
        )
        result = await turn(config, services, "a")
        assert result.executed == ("kit__hang", "kit__echo")
        hung, echoed = tool_results(fake_llm.requests[2])
        assert hung == "Error: MCP server 'kit' did not answer within 0.5s"
        assert "still here" in echoed
        assert (await server_counts(services))["hang"] == 1
    assert len(spawns.read_text().split()) == 1  # a slow tool is not a dead server
    assert any("kit__hang timed out after 0.5s" in line for line in warnings_logged)


async def test_a_garbage_answer_is_a_tool_error_and_the_session_keeps_working(
    fake_llm: FakeOpenAI, load: Callable[..., Config], tmp_path: Path, warnings_logged: list[str]
) -> None:
    config = faulty(fake_llm, load, tmp_path / "spawns")
    async with mcp_services(config, "a") as services:
        fake_llm.script(tool_call("kit__garbage", {}), tool_call("kit__echo", {"text": "fine"}), text("ok"))
        await turn(config, services, "a")
    garbage, echoed = tool_results(fake_llm.requests[2])
    assert garbage == "Error: MCP server 'kit' sent a malformed answer"
    assert "fine" in echoed
    assert any("sent a malformed answer to kit__garbage" in line for line in warnings_logged)


async def test_servers_that_cannot_start_fail_alone(
    fake_llm: FakeOpenAI, load: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORCH_TEST_MISSING_TOKEN", raising=False)
    config = load(
        provider_toml(fake_llm.base_url)
        + stdio_kit()
        + '[mcp.servers.missing]\ntransport = "stdio"\ncommand = "/nonexistent/mcp-server"\n'
        + '[mcp.servers.nokey]\ntransport = "stdio"\ncommand = "true"\n'
        + 'env = { API_TOKEN = "env:ORCH_TEST_MISSING_TOKEN" }\n'
        + f'[mcp.servers.dies]\ntransport = "stdio"\ncommand = "{sys.executable}"\nargs = ["-c", "pass"]\n'
        + bundle("b", servers={"kit": ["echo"], "missing": ["*"], "nokey": ["*"], "dies": ["*"]})
        + agent_toml("a", bundles=["b"])
    )
    async with McpPool(config, backoff=FAST_BACKOFF, connect_timeout_s=20) as pool:
        with pytest.raises(McpServerUnavailable) as raised:
            await pool.ensure_connected(["kit", "missing", "nokey", "dies"], agent="a")
        reasons = dict(raised.value.failures)
        assert set(reasons) == {"missing", "nokey", "dies"}
        assert reasons["missing"] == "cannot start the command: No such file or directory"
        assert reasons["nokey"] == (
            "secret 'env:ORCH_TEST_MISSING_TOKEN': environment variable ORCH_TEST_MISSING_TOKEN is not set"
        )
        assert str(raised.value).splitlines()[0] == (
            "MCP server 'missing' is unavailable: cannot start the command: No such file or directory "
            "(check [mcp.servers.missing], or run `orchestrator check --connect`)"
        )
        states = {s.server: s.state for s in pool.status()}
        # Missing command or secret: retrying cannot help. A server that exits is retried.
        assert states["missing"] is ConnectionState.FAILED and states["nokey"] is ConnectionState.FAILED
        assert states["dies"] in (ConnectionState.BACKOFF, ConnectionState.CONNECTING)
        services = Services(mcp=pool)
        try:
            fake_llm.script(tool_call("kit__echo", {"text": "unaffected"}), text("ok"))
            result = await turn(config, services, "a")
        finally:
            await services.providers.aclose()
        assert result.executed == ("kit__echo",)
        assert "unaffected" in tool_results(fake_llm.requests[1])[0]
        assert [t["function"]["name"] for t in fake_llm.requests[0]["tools"]] == ["kit__echo"]
        assert pool_of(services) is pool


async def test_a_server_that_never_answers_times_out_and_shutdown_does_not_wait_for_it(
    load: Callable[..., Config],
) -> None:
    config = load(
        '[mcp.servers.mute]\ntransport = "stdio"\n'
        f'command = "{sys.executable}"\nargs = ["-c", "import sys; sys.stdin.read()"]\n'
    )
    async with McpPool(config, backoff=FAST_BACKOFF, connect_timeout_s=0.5) as pool:
        with pytest.raises(McpServerUnavailable) as raised:
            await pool.ensure_connected(["mute"])
        assert raised.value.failures == (("mute", "no answer within 0.5s"),)

    slow = McpPool(config, connect_timeout_s=30)
    async with slow:
        waiter = asyncio.ensure_future(slow.ensure_connected(["mute"]))
        await wait_for(lambda: [s.state for s in slow.status()] == [ConnectionState.CONNECTING])
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        started = time.monotonic()
    assert time.monotonic() - started < 3.0  # the attempt in flight was cancelled, not waited out
    assert slow.status()[0].state is ConnectionState.CLOSED
