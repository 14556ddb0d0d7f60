"""An SOP's steps are turns like any other: GET /metrics counts them and GET /api/usage records them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.gateway import GatewayAddress
from tests.fakes.openai_server import FakeOpenAI, text, with_usage
from tests.observability.kit import TOKEN, daemon, daemon_toml, samples, scrape, value, write

TURNS = "orchestrator_turns_total"
TOKENS = "orchestrator_model_tokens_total"

TWO_STEPS = """
[agents.scribe]
provider = "fake"
model = "m2"

[sops.two]
agent = "helper"
[[sops.two.steps]]
prompt = "Gather."
[[sops.two.steps]]
prompt = "Write it up."
agent = "scribe"
"""


async def _usage(address: GatewayAddress) -> Any:
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{address.url}/api/usage?by=agent&since=all", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as response:
            assert response.status == 200
            return await response.json()


async def test_a_chat_message_and_a_two_step_sop_are_three_turns_in_metrics_and_usage(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    path = write(tmp_path, daemon_toml(fake_llm, extra=TWO_STEPS, route='sops = ["two"]'))
    async with daemon(path) as (_, term, address):
        fake_llm.script(
            with_usage(text("hi alice"), prompt=100, completion=10),
            with_usage(text("gathered"), prompt=200, completion=20),
            with_usage(text("written up"), prompt=300, completion=30),
        )
        term.type("hello")
        await term.screen.wait_for(lambda ls: "hi alice" in ls)
        term.type("/sop two")
        await term.screen.wait_for(lambda ls: "written up" in ls)
        _, _, body = await scrape(address)
        usage = await _usage(address)
    assert len(fake_llm.requests) == 3
    turns = {labels: n for (name, labels), n in samples(body).items() if name == TURNS}
    assert sum(turns.values()) == 3  # one per model request: the chat turn and both steps
    assert value(body, TURNS, {"agent": "helper", "channel": "term", "path": "channel", "stop": "completed"}) == 1
    step = {"channel": "-", "path": "sop_step", "stop": "completed"}
    assert value(body, TURNS, {**step, "agent": "helper"}) == 1
    assert value(body, TURNS, {**step, "agent": "scribe"}) == 1
    assert value(body, "orchestrator_turn_duration_seconds_count", {"agent": "scribe", "path": "sop_step"}) == 1
    assert value(body, TOKENS, {"agent": "helper", "provider": "fake", "model": "m", "kind": "output"}) == 30
    assert value(body, TOKENS, {"agent": "scribe", "provider": "fake", "model": "m2", "kind": "output"}) == 30
    by_agent = {row["key"]: (row["calls"], row["total_tokens"]) for row in usage["rows"]}
    assert by_agent == {"helper": (2, 330), "scribe": (1, 330)}
