"""GET /api/usage: the recorded usage behind the gateway's bearer token, as `orchestrator usage --json`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from orchestrator import cli
from tests.fakes.openai_server import FakeOpenAI, text, with_usage
from tests.gateway.kit import call, gateway_toml, serving, write


async def test_usage_endpoint_sums_the_turns_and_matches_the_cli(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url))
    async with serving(path) as (_, gw):
        status, body, _ = await call(gw, "GET", "/api/usage", headers={})
        assert (status, body["error"]) == (401, "unauthorized")
        fake_llm.script(with_usage(text("one"), prompt=120, completion=30), with_usage(text("two"), prompt=80, completion=20))
        for message in ("first", "second"):
            status, _, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": message})
            assert status == 200
        status, by_agent, _ = await call(gw, "GET", "/api/usage")
        status_sender, by_sender, _ = await call(gw, "GET", "/api/usage?by=sender&since=all&agent=ops")
        status_none, nobody, _ = await call(gw, "GET", "/api/usage?agent=intern")
        bad = [await call(gw, "GET", f"/api/usage?{query}") for query in ("since=forever", "by=colour", "since=0d")]
        code = await asyncio.to_thread(cli.main, ["usage", "--json", "--config", str(path)])
    assert status == status_sender == status_none == 200 and code == 0
    assert by_agent["rows"] == [{
        "key": "ops", "calls": 2, "input_tokens": 200, "output_tokens": 50, "cached_tokens": 0,
        "cache_write_tokens": 0, "total_tokens": 250, "cost": None, "estimated_calls": 0,
    }]
    assert by_agent["total"]["total_tokens"] == 250 and by_agent["by"] == "agent"
    assert [row["key"] for row in by_sender["rows"]] == ["gateway"] and by_sender["since"] is None
    assert nobody["rows"] == [] and nobody["total"]["calls"] == 0
    assert [(s, b["error"]) for s, b, _ in bad] == [(400, "bad_request")] * 3
    assert "since 'forever': expected a span like 30m, 12h, 7d, 2w, or all" in bad[0][1]["detail"]
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == by_agent["rows"]  # the CLI reads the same table, read-only, while the daemon runs
