"""L2 parity for the gateway chat and library paths: driven through their real entry points.

The gateway turn is an HTTP request to a gateway running in a Runtime; the library turn is
`orchestrator.Agent.from_config(...).run(...)`; both must hand the engine what the cli-run
path (`orchestrator agent`) resolves, differing only in interactivity.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import orchestrator
from orchestrator import cli
from orchestrator.policy import Interactivity
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import call, gateway_toml, serving, write
from tests.parity.conftest import parity_toml
from tests.parity.test_l2_paths import comparable, declared

pytestmark = pytest.mark.slow


async def _three_paths(
    path: Path, agent: str, fake: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> dict[ConstructionPath, tuple[ResolvedAgentExecution, dict[str, object]]]:
    """Run one turn on cli-run, gateway chat and library; return each execution and provider request."""
    fake.script(text("cli"), text("gateway"), text("library"))
    code = await asyncio.to_thread(cli.main, ["agent", agent, "-m", "hi", "--config", str(path)])
    assert code == 0
    async with serving(path) as (_, gw):
        status, body, _ = await call(gw, "POST", f"/api/agents/{agent}/messages", json={"text": "hi"})
    assert (status, body["reply"]) == (200, "gateway")
    async with orchestrator.Agent.from_config(path, agent) as library:
        assert (await library.run("hi")).text == "library"
    assert [e.identity.path for e in seen] == [
        ConstructionPath.CLI_RUN, ConstructionPath.GATEWAY_CHAT, ConstructionPath.LIBRARY,
    ]
    return {e.identity.path: (e, r) for e, r in zip(seen, fake.requests, strict=True)}


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_gateway_chat_and_library_resolve_the_cli_run_policy(
    agent: str,
    tmp_path: Path,
    fake_llm: FakeOpenAI,
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write(tmp_path, parity_toml(fake_llm.base_url) + "\n[gateway]\nport = 0\n")
    runs = await _three_paths(path, agent, fake_llm, seen)
    cli_run, cli_request = runs[ConstructionPath.CLI_RUN]
    baseline = comparable(cli_run.describe())
    for surface in (ConstructionPath.GATEWAY_CHAT, ConstructionPath.LIBRARY):
        execution, request = runs[surface]
        assert comparable(execution.describe()) == declared(surface, baseline), surface
        # what the provider was sent: the same tools, model binding and system prompt
        assert request.get("tools") == cli_request.get("tools") == list(execution.tools.provider_specs())
        assert (request["model"], request["temperature"]) == (cli_request["model"], cli_request["temperature"])
        assert request["messages"][0] == cli_request["messages"][0]
        # neither surface has an operator by default: approvals are denied
        assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    # the values are the agent's own (memory opened where the policy grants it; peripherals too)
    assert ("memory_store" in cli_run.tools) is (agent == "ops")
    assert "arm__status" in cli_run.tools


async def test_library_opens_the_agents_mcp_bundles_like_cli_run(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url, mcp=True, gateway="port = 0\n"))
    runs = await _three_paths(path, "ops", fake_llm, seen)
    cli_run, _ = runs[ConstructionPath.CLI_RUN]
    assert cli_run.tools.deferred == {"kit__echo", "kit__env_value"}
    for surface in (ConstructionPath.GATEWAY_CHAT, ConstructionPath.LIBRARY):
        execution, request = runs[surface]
        assert comparable(execution.describe()) == comparable(cli_run.describe()), surface
        assert execution.tools.deferred == cli_run.tools.deferred
        assert "tool_search" in [t["function"]["name"] for t in request["tools"]]
