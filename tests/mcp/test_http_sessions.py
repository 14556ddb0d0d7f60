"""MCP over streamable HTTP: a server that forgot the session (404, or the 400 some servers
send) gets a new session and the call is retried once, as the spec says a client MUST."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from orchestrator.config import Config
from tests.conftest import provider_toml
from tests.fakes.mcp_servers.forgetful import ForgetfulMcp
from tests.mcp.kit import agent_toml, bundle, execution, http_kit, mcp_services


@pytest.fixture(params=[404, 400], ids=["404", "400"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[ForgetfulMcp]:
    async with ForgetfulMcp(unknown_session_status=request.param) as fake:
        yield fake


async def test_a_forgotten_session_is_reopened_and_the_call_retried_once(
    load: Callable[..., Config], server: ForgetfulMcp
) -> None:
    config = load(
        provider_toml("http://127.0.0.1:9/v1")
        + http_kit("web", server.url)
        + bundle("b", servers={"web": ["echo", "session"]})
        + agent_toml("a", bundles=["b"])
    )
    async with mcp_services(config, "a") as services:
        tools = execution(config, services, "a").tools
        echo, session = tools.get("web__echo"), tools.get("web__session")
        assert echo is not None and session is not None
        first = await session.invoke({})
        server.forget()  # the server restarted or expired the session
        assert await echo.invoke({"text": "still here"}) == "still here"
        second = await session.invoke({})
        server.forget()
        assert await echo.invoke({"text": "and again"}) == "and again"
    print(f"\nHTTP {server.unknown_session_status}: sessions opened {server.initializes}, "
          f"requests refused {server.refused}, calls {dict(server.calls)}")
    assert first != second  # a new session, not the forgotten one
    assert server.initializes == 3
    assert server.refused == 2  # one refused call per forgetting, each retried once
    assert server.calls == {"echo": 2, "session": 2}  # every call ran exactly once
