"""Pinned resources: gated per bundle, read once per turn, wrapped as untrusted data."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from orchestrator.config import Config, SecretRef, resolve_secret
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.seam import ConstructionPath
from tests.conftest import provider_toml
from tests.fakes.mcp_servers.kit import NOTES
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.mcp.kit import agent_toml, bundle, execution, mcp_services, server_counts, stdio_kit, turn

pytestmark = pytest.mark.slow


async def test_pinned_resources_are_read_each_turn_wrapped_and_gated(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = load(
        provider_toml(fake_llm.base_url)
        + stdio_kit()
        + bundle("pins", servers={"kit": ["echo"]}, pinned={"kit": ["memo://note*"]})
        + bundle("plain", servers={"kit": ["echo"]})
        + agent_toml("pinned", bundles=["pins"], extra='system_prompt = "You are pinned."\n')
        + agent_toml("plain", bundles=["plain"])
    )
    async with mcp_services(config, "pinned", "plain") as services:
        fake_llm.script(tool_call("kit__echo", {"text": "x"}), text("one"), text("two"), text("plain"))
        transcript = Transcript(session="s")
        pinned = execution(config, services, "pinned")
        for message in ("first", "second"):
            await run_tool_call_loop(pinned, transcript, message)
        await turn(config, services, "plain")
        acp = execution(config, services, "pinned", ConstructionPath.ACP)
        counts = await server_counts(services)

    systems = [r["messages"][0]["content"] for r in fake_llm.requests[:3]]
    expected = (
        'You are pinned.\n\n<untrusted-data source="mcp:kit:memo://notes">\n'
        f"{NOTES}\n</untrusted-data>\n"
    )
    assert all(s.startswith(expected) for s in systems)
    assert "PRIVATE" not in "".join(systems)  # memo://private matches no pin of this bundle
    assert fake_llm.requests[3]["messages"][0]["role"] == "user"  # the plain agent: no system prompt
    # Once per turn (two turns, three model requests), never for the unpinned agent.
    assert counts["read:memo://notes"] == 2 and "read:memo://private" not in counts
    assert acp.turn_context == ()  # connect_mcp=False withholds pinned resources too


async def test_a_pinned_resource_cut_inside_a_secret_shows_none_of_it(
    fake_llm: FakeOpenAI, load: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut to max_tool_result_chars first and redacted after, the model saw the secret but its last character.
    secret = "tok-pinned-9d3e7a1f5b2c8e4d"
    monkeypatch.setenv("ORCH_TEST_PINNED_SECRET", secret)
    resolve_secret(SecretRef("env:ORCH_TEST_PINNED_SECRET"))  # resolved, so registered
    notes = "n" * 90 + secret + " and more notes"  # the cap (100) falls at the secret's 11th character
    config = load(
        provider_toml(fake_llm.base_url)
        + stdio_kit(env={"KIT_NOTES": notes})
        + bundle("pins", servers={"kit": ["echo"]}, pinned={"kit": ["memo://notes"]})
        + agent_toml("pinned", bundles=["pins"], extra="[agents.pinned.budget]\nmax_tool_result_chars = 100\n")
    )
    async with mcp_services(config, "pinned") as services:
        fake_llm.script(text("ok"))
        await run_tool_call_loop(execution(config, services, "pinned"), Transcript(session="s"), "hi")
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert '<untrusted-data source="mcp:kit:memo://notes">\n' + "n" * 90 + "[redacted]" in system
    assert "[truncated" in system and secret[:4] not in system
