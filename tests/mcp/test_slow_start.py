"""The daemon never waits on a slow MCP server: it serves while the server connects, and a
call to that server's tool meanwhile says the server is not available right now (not that
the tool is forbidden); once it is up, the tool works. A chat turn that starts while the
server is still on its first connect waits for it up to `ready_wait_s`, so the first turn
after READY is offered its tools."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.daemon import Runtime, start_channels
from orchestrator.seam import build_channel
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_api import FakeTelegram
from tests.mcp.kit import agent_toml, bundle, stdio_kit, tool_results

pytestmark = pytest.mark.slow

TOKEN = "555555:EEE-slow-mcp-bot"


async def test_a_slow_server_delays_nothing_and_is_reported_unavailable_until_it_is_up(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = load(
        provider_toml(fake_llm.base_url) + stdio_kit(slow_start_s=4.0)
        + bundle("b", servers={"kit": ["echo"]}) + agent_toml("a", bundles=["b"])
    )
    started = time.monotonic()
    async with Runtime.open(config) as runtime:
        opened_in = time.monotonic() - started
        assert not runtime.mcp_settled.is_set()  # still connecting, and the runtime is serving
        fake_llm.script(tool_call("kit__echo", {"text": "early"}), text("later"))
        early = build_channel(config, "a", runtime.services)
        assert "kit__echo" not in early.tools.names
        await run_tool_call_loop(early, Transcript(session="s"), "go")
        await asyncio.wait_for(runtime.mcp_settled.wait(), 30)
        fake_llm.script(tool_call("kit__echo", {"text": "now"}), text("done"))
        ready = build_channel(config, "a", runtime.services)
        await run_tool_call_loop(ready, Transcript(session="s2"), "go")
    assert opened_in < 3.0  # not the server's four seconds
    assert tool_results(fake_llm.requests[1]) == [
        "Error: MCP server 'kit' is not available right now (starting up or down); 'kit__echo' was not run. "
        "Try again later."
    ]
    assert "kit__echo" in ready.tools.names
    assert "now" in tool_results(fake_llm.requests[3])[0]  # the server ran it


async def test_the_first_chat_turn_after_ready_waits_for_a_server_still_connecting(
    fake_llm: FakeOpenAI, load: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_SLOW_MCP", TOKEN)
    async with FakeTelegram(token=TOKEN, username="slow_bot") as tg:
        config = load(
            provider_toml(fake_llm.base_url) + stdio_kit(slow_start_s=2.0)
            + bundle("b", servers={"kit": ["echo"]}) + agent_toml("a", bundles=["b"])
            + f'[channels.tg]\nkind = "telegram"\ntoken = "env:TG_SLOW_MCP"\napi_base_url = "{tg.api_base_url}"\n'
            + 'poll_timeout_s = 1\nstream = false\n[[routes]]\nchannel = "tg"\nagent = "a"\nsenders = ["*"]\n'
        )
        fake_llm.script(tool_call("kit__echo", {"text": "first turn"}), text("done"))
        async with Runtime.open(config) as runtime:
            await start_channels(runtime, ready_timeout_s=10)
            assert not runtime.mcp_settled.is_set()  # READY while the server still starts
            tg.push_message(5, 5, "use the tool")
            await tg.wait_for(lambda: [p["text"] for p in tg.sent] == ["done"], timeout=30)
            await runtime.drain(10)
    assert "kit__echo" in [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]  # offered at once
    assert "first turn" in tool_results(fake_llm.requests[1])[0]  # and the server ran it
