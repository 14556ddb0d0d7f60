"""GET /metrics after real turns through a channel: turns, latency, tools, approvals, provider errors, state."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp

import pytest

from channels import Inbound
from orchestrator.daemon import Disposition, process_message

from orchestrator.gateway import GatewayAddress
from tests.daemon.harness import Terminal
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call
from tests.observability.kit import SCRAPE, TOKEN, daemon, daemon_toml, samples, scrape, value, write

pytestmark = pytest.mark.slow

GATEWAY_DOC = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def documented_content_type() -> str:
    """The Content-Type docs/gateway.md gives for GET /metrics (its endpoint row)."""
    row = next(line for line in GATEWAY_DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `GET /metrics`"))
    found = re.search(r"`(text/plain;[^`]*)`", row)
    assert found is not None, f"docs/gateway.md: the /metrics row names no content type: {row}"
    return found.group(1)


async def _ask(fake: FakeOpenAI, term: Terminal, file: str) -> str:
    fake.script(tool_call("file_write", {"path": file, "content": "x"}), text(f"done {file}"))
    term.type(f"write {file}")
    lines = await term.screen.wait_for(lambda ls: any(f'"{file}"' in line for line in ls))
    prompt = next(line for line in lines if f'"{file}"' in line)
    return prompt.split("]")[0].removeprefix("[approval ")


async def test_turns_tools_and_approvals_are_counted_with_their_labels(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with daemon(write(tmp_path, daemon_toml(fake_llm))) as (_, term, address):
        fake_llm.script(text("hi alice"))
        term.type("hello")
        await term.screen.wait_for(lambda ls: "hi alice" in ls)
        term.type(f"/approve {await _ask(fake_llm, term, 'a.txt')}")
        await term.screen.wait_for(lambda ls: "done a.txt" in ls)
        term.type(f"/deny {await _ask(fake_llm, term, 'b.txt')}")
        await term.screen.wait_for(lambda ls: "done b.txt" in ls)
        await _ask(fake_llm, term, "c.txt")  # nobody answers within 1.5 s
        await term.screen.wait_for(lambda ls: "done c.txt" in ls)
        # a made-up tool name is refused and counted under one label, never its own series
        fake_llm.script(tool_call("serach", {"q": "x"}), text("no such tool"))
        term.type("search")
        await term.screen.wait_for(lambda ls: "no such tool" in ls)
        code, kind, body = await scrape(address)
    assert code == 200 and kind == documented_content_type()
    turn = {"agent": "helper", "channel": "term", "path": "channel", "stop": "completed"}
    assert value(body, "orchestrator_turns_total", turn) == 5
    assert value(body, "orchestrator_turn_duration_seconds_count", {"agent": "helper", "path": "channel"}) == 5
    assert value(body, "orchestrator_model_request_duration_seconds_count", {"provider": "fake", "model": "m"}) == 9
    tools = {"agent": "helper", "tool": "file_write"}
    assert value(body, "orchestrator_tool_calls_total", {**tools, "outcome": "ran"}) == 1
    assert value(body, "orchestrator_tool_calls_total", {**tools, "outcome": "refused"}) == 2
    unknown = {"agent": "helper", "tool": "(unknown)", "outcome": "refused"}
    assert value(body, "orchestrator_tool_calls_total", unknown) == 1
    assert "serach" not in body
    assert value(body, "orchestrator_approvals_asked_total", {"agent": "helper"}) == 3
    for outcome in ("granted", "denied", "timed_out"):
        assert value(body, "orchestrator_approvals_total", {"agent": "helper", "outcome": outcome}) == 1, outcome
    assert value(body, "orchestrator_provider_errors_total", {"provider": "fake", "class": "server_error"}) is None


async def test_provider_failures_are_counted_by_class(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with daemon(write(tmp_path, daemon_toml(fake_llm))) as (_, term, address):
        fake_llm.script(status(500), status(429, retry_after=0.001))
        for line in ("first", "second"):
            term.type(line)
        await term.screen.wait_for(lambda ls: sum("provider failed" in line for line in ls) == 2)
        # a provider nothing listens on: an outage, through the gateway's own path
        code, reply = await _post(address, "/api/agents/offline/messages", {"text": "anyone there?"})
        assert (code, reply["stop"]) == (502, "provider_error")
        _, _, body = await scrape(address)
    errors = "orchestrator_provider_errors_total"
    assert value(body, errors, {"provider": "fake", "class": "server_error"}) == 1
    assert value(body, errors, {"provider": "fake", "class": "rate_limited"}) == 1
    assert value(body, errors, {"provider": "down", "class": "connection"}) == 1
    failed = {"agent": "helper", "channel": "term", "path": "channel", "stop": "provider_error"}
    assert value(body, "orchestrator_turns_total", failed) == 2
    gateway = {"agent": "offline", "channel": "-", "path": "gateway_chat", "stop": "provider_error"}
    assert value(body, "orchestrator_turns_total", gateway) == 1
    assert value(body, "orchestrator_model_request_duration_seconds_count", {"provider": "down", "model": "gone"}) == 1


async def test_state_gauges_are_read_at_scrape_time(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with daemon(write(tmp_path, daemon_toml(fake_llm))) as (runtime, term, address):
        _, _, idle = await scrape(address)
        assert value(idle, "orchestrator_channel_up", {"channel": "term", "kind": "terminal"}) == 1
        assert value(idle, "orchestrator_inbox_depth") == 0
        assert value(idle, "orchestrator_sessions_live") == 0
        fake_llm.latency_s = 1.0
        fake_llm.script(text("one"), text("two"))
        both = asyncio.gather(*(
            process_message(runtime, Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text=t, event_id=t))
            for t in ("first", "second")
        ))
        while value(body := (await scrape(address))[2], "orchestrator_session_queue_length_max") != 1:
            await asyncio.sleep(0.02)
        assert value(body, "orchestrator_inbox_depth") == 2
        assert value(body, "orchestrator_sessions_live") == 1
        assert _by_queue_length(body) == {"0": 0, "1": 1, "2-4": 0, "5-9": 0, "10+": 0}
        assert await both == [Disposition.ANSWERED, Disposition.ANSWERED]
        _, _, after = await scrape(address)
    assert value(after, "orchestrator_inbox_depth") == 0
    assert value(after, "orchestrator_session_queue_length_max") == 0
    assert _by_queue_length(after) == {"0": 0, "1": 0, "2-4": 0, "5-9": 0, "10+": 0}
    assert "alice" not in after and "alice" not in body  # no series names a session


def _by_queue_length(body: str) -> dict[str, float]:
    found = samples(body).items()
    return {dict(labels)["waiting"]: v for (name, labels), v in found if name == "orchestrator_sessions_by_queue_length"}


async def test_mcp_server_states_are_reported(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    from tests.mcp.kit import bundle, stdio_kit

    extra = stdio_kit("kit") + bundle("tools", servers={"kit": ["echo"]}) + '\n[agents.kitted]\nprovider = "fake"\nmodel = "m"\nmcp_bundles = ["tools"]\n'
    async with daemon(write(tmp_path, daemon_toml(fake_llm, extra=extra))) as (_, _, address):
        _, _, body = await scrape(address)
    found = {labels: v for (name, labels), v in samples(body).items() if name == "orchestrator_mcp_server_state"}
    ready = [dict(labels) for labels, v in found.items() if v == 1]
    assert [(r["server"], r["state"]) for r in ready] == [("kit", "ready")]
    assert sum(1 for labels in found if dict(labels)["server"] == "kit") == 5  # one series per state


async def test_metrics_take_the_scrape_or_gateway_token_and_nothing_else(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with daemon(write(tmp_path, daemon_toml(fake_llm))) as (_, _, address):
        assert (await scrape(address, SCRAPE))[0] == 200
        assert (await scrape(address, TOKEN))[0] == 200
        assert (await scrape(address, None))[0] == 401
        assert (await scrape(address, SCRAPE[:-1] + "x"))[0] == 401
        # the scrape token reads the metrics only: it cannot list agents or run a turn
        async with aiohttp.ClientSession() as session:
            async with session.get(address.url + "/api/agents", headers={"Authorization": f"Bearer {SCRAPE}"}) as r:
                assert r.status == 401


async def test_metrics_off_is_a_404_and_attaches_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    text_ = daemon_toml(fake_llm, gateway="").replace('metrics_token = "file:scrape.token"\n', "")
    async with daemon(write(tmp_path, text_)) as (runtime, term, address):
        assert runtime.observability.metrics is None
        assert runtime.services.providers._watchers == []  # no observer on the model path
        assert runtime.services.usage._watchers == ()  # nor where usage is recorded
        code, _, body = await scrape(address, TOKEN)
        fake_llm.script(text("still fine"))
        term.type("hello")
        await term.screen.wait_for(lambda ls: "still fine" in ls)
    assert code == 404 and "gateway.metrics = true" in body


async def _post(address: GatewayAddress, path: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        async with session.post(address.url + path, json=body, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            return r.status, await r.json()
