"""MCP parity: the same per-agent MCP scope on every construction path, through real entry points.

`orchestrator agent` (cli run) and `orchestrator tools` (listing) connect the servers the
agent's bundles need and must agree with each other, with the registry, and with what the
provider was sent. Paths whose entry points later issues build are resolved at the seam
over one pool; they may differ only by their declared knobs (ACP: `connect_mcp=False`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.mcp import McpPool
from orchestrator.seam import (
    PATH_PROFILES,
    ConstructionPath,
    ResolvedAgentExecution,
    Services,
    mcp_servers_for,
    resolve,
)
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.mcp.kit import FAST_BACKOFF, agent_toml, bundle, stdio_kit

pytestmark = pytest.mark.slow

# Paths that withhold MCP by their declared knobs; every other path must match cli run.
WITHHELD: frozenset[ConstructionPath] = frozenset({ConstructionPath.ACP})


def mcp_parity_toml(base_url: str) -> str:
    """Two agents on one server: eager with globs and exclusions, and deferred under read_only."""
    return (
        provider_toml(base_url)
        + stdio_kit()
        + bundle("ops_tools", servers={"kit": ["echo", "write_*", "pid"]})
        + bundle("ops_secret", servers={"kit": ["secret_op"]})
        + bundle("intern_lazy", servers={"kit": ["echo", "env_value", "write_note"]}, mode="deferred")
        + agent_toml(
            "ops",
            bundles=["ops_tools", "ops_secret"],
            autonomy="supervised",
            extra='system_prompt = "You are ops."\ntools = ["list_dir"]\nexcluded_tools = ["kit__pid"]\n'
            '[agents.ops.approval]\nauto_approve = ["kit__echo", "list_dir"]\n',
        )
        + agent_toml("intern", bundles=["intern_lazy"], autonomy="read_only",
                     extra='system_prompt = "You are the intern."\n')
    )


async def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the real CLI entry point (it calls asyncio.run) off the test's event loop."""
    code = await asyncio.to_thread(cli.main, argv)
    return code, capsys.readouterr().out


def mcp_part(names: Any) -> list[str]:
    return sorted(n for n in names if "__" in n or n == "tool_search")


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_mcp_scope_is_the_same_on_cli_run_and_listing(
    agent: str,
    fake_llm: FakeOpenAI,
    write_config: Callable[..., Path],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(mcp_parity_toml(fake_llm.base_url))
    fake_llm.script(text("hello"))
    assert await run_cli(["agent", agent, "-m", "hi", "--config", str(path)], capsys) == (0, "hello\n")
    (execution,) = seen
    code, listing = await run_cli(["tools", agent, "--json", "--config", str(path)], capsys)
    assert code == 0
    rows = {row["name"]: row for row in json.loads(listing)}
    assert list(rows) == list(execution.tools.names)
    # the listing path shows what the cli-run turn was given, row for row
    assert list(rows.values()) == execution.tool_rows()
    request = fake_llm.requests[0]
    assert request["tools"] == list(execution.tools.provider_specs())
    assert request["messages"][0] == {"role": "system", "content": execution.system_prompt}
    if agent == "ops":
        assert mcp_part(rows) == ["kit__echo", "kit__secret_op", "kit__write_note"]  # kit__pid excluded
        assert [t["function"]["name"] for t in request["tools"]] == [
            "kit__echo", "kit__secret_op", "kit__write_note", "list_dir",
        ]
        assert (rows["kit__echo"]["approval"], rows["kit__write_note"]["approval"]) == ("allow", "ask")
    else:
        # read_only keeps only readOnlyHint tools; deferred ones are listed but not sent.
        assert mcp_part(rows) == ["kit__echo", "kit__env_value", "tool_search"]
        assert [t["function"]["name"] for t in request["tools"]] == ["tool_search"]
        assert execution.tools.deferred == {"kit__echo", "kit__env_value"}


async def test_mcp_per_tool_gating_is_identical_on_every_path(write_config: Callable[..., Path]) -> None:
    config = load_config(write_config(mcp_parity_toml("http://127.0.0.1:9/v1")))
    async with McpPool(config, backoff=FAST_BACKOFF) as pool:
        for agent in ("ops", "intern"):
            await pool.ensure_connected(mcp_servers_for(config, agent), agent=agent)
        services = Services(mcp=pool)
        for agent in ("ops", "intern"):
            baseline = _mcp_view(resolve(config, agent, path=ConstructionPath.CLI_RUN, services=services))
            assert baseline["names"], agent
            for path in ConstructionPath:
                view = _mcp_view(resolve(config, agent, path=path, services=services))
                expected = _WITHHELD_VIEW if path in WITHHELD else baseline
                assert view == expected, (agent, path)
                assert bool(mcp_servers_for(config, agent, path=path)) is (path not in WITHHELD)


_WITHHELD_VIEW: dict[str, object] = {"names": [], "read_only": {}, "deferred": [], "sections": [], "bundles": []}


def _mcp_view(execution: ResolvedAgentExecution) -> dict[str, object]:
    names = mcp_part(execution.tools.names)
    read_only = {}
    for name in names:
        tool = execution.tools.get(name)
        assert tool is not None
        read_only[name] = tool.spec.read_only
    return {
        "names": names,
        "read_only": read_only,
        "deferred": sorted(execution.tools.deferred),
        "sections": [s.name for s in execution.prompt_sections],
        "bundles": list(execution.mcp_bundles),
    }


async def test_deferred_tool_search_scope_is_identical_on_every_path(
    fake_llm: FakeOpenAI,
    write_config: Callable[..., Path],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(mcp_parity_toml(fake_llm.base_url))
    config: Config = load_config(path)
    async with McpPool(config, backoff=FAST_BACKOFF) as pool:
        await pool.ensure_connected(mcp_servers_for(config, "intern"), agent="intern")
        services = Services(mcp=pool)
        for construction in ConstructionPath:
            if not PATH_PROFILES[construction].runs_turns or construction in WITHHELD:
                continue
            search = resolve(config, "intern", path=construction, services=services).tools.get("tool_search")
            assert search is not None, construction
            everything = json.loads(await search.invoke({"query": "*", "limit": 20}))
            assert [m["name"] for m in everything["matches"]] == ["kit__echo", "kit__env_value"], construction
            for query in ("kit__secret_op", "privileged operation", "write_note"):
                assert json.loads(await search.invoke({"query": query}))["matches"] == [], (construction, query)

    # The same through the real cli-run entry point: the search cannot surface another
    # agent's (or a non-read-only) tool, and a call by its exact name is refused.
    fake_llm.script(
        tool_call("tool_search", {"query": "kit__secret_op"}),
        tool_calls(("kit__secret_op", {"target": "prod"}), ("kit__echo", {"text": "mine"})),
        text("done"),
    )
    assert await run_cli(["agent", "intern", "-m", "go", "--config", str(path)], capsys) == (0, "done\n")
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.CLI_RUN
    searched = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert '"matches": []' in searched
    refused, echoed = [m["content"] for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"][1:]
    assert refused == "Error: tool 'kit__secret_op' is not available to this agent. It was not run."
    assert "\nmine\n" in echoed
    assert all([t["function"]["name"] for t in r["tools"]] == ["tool_search"] for r in fake_llm.requests)
