"""Property: two agents' registries never share an MCP tool neither of their bundles grants.

The pool is the real `McpPool` with its last listings fixed (a fake offer per server), so
random bundles are gated by the real scoping over a known offer without a live server.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from fnmatch import fnmatchcase
from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.checks import parse_config
from orchestrator.config import Config
from orchestrator.mcp import McpPool, RemoteTool, ServerOffer
from orchestrator.seam import ConstructionPath, Services, build_cli_run, build_on_path

STATE = tempfile.mkdtemp(prefix="orchestrator-mcp-prop-")
atexit.register(shutil.rmtree, STATE, True)
OFFER = {
    "kit": [("echo", True), ("write_note", False), ("pid", True), ("secret_op", False)],
    "db": [("query", True), ("drop", False)],
}
PATTERNS = ["echo", "write_*", "pid", "secret_op", "query", "drop", "*", "?ue*"]


class OfferedPool(McpPool):
    """The real pool with fixed listings: `offer()` answers without a connection."""

    def offer(self, server: str, agent: str | None) -> ServerOffer | None:
        tools = OFFER.get(server)
        if tools is None:
            return None
        return ServerOffer(
            tools=tuple(
                RemoteTool(name=n, description=n, input_schema=MappingProxyType({"type": "object"}), read_only=ro)
                for n, ro in tools
            ),
            resources=(),
        )


bundle_st = st.fixed_dictionaries(
    {
        "servers": st.lists(st.sampled_from(sorted(OFFER)), unique=True, min_size=1),
        "patterns": st.lists(st.sampled_from(PATTERNS), unique=True, max_size=3),
        "mode": st.sampled_from(["eager", "deferred"]),
    }
)
agent_st = st.fixed_dictionaries(
    {
        "bundles": st.lists(bundle_st, max_size=2),
        "excluded": st.lists(st.sampled_from(["kit__echo", "db__*", "tool_search", "kit__write_note"]), unique=True,
                             max_size=2),
        "autonomy": st.sampled_from(["read_only", "supervised", "full"]),
    }
)


def make_config(agents: dict[str, dict[str, object]]) -> Config:
    bundles: dict[str, object] = {}
    agent_tables: dict[str, object] = {}
    for name, spec in agents.items():
        names = []
        for i, b in enumerate(spec["bundles"]):  # type: ignore[arg-type]
            key = f"{name}_{i}"
            bundles[key] = {
                "servers": b["servers"], "mode": b["mode"],
                "tools": {s: b["patterns"] for s in b["servers"]},
            }
            names.append(key)
        agent_tables[name] = {
            "provider": "p", "model": "m", "autonomy": spec["autonomy"],
            "mcp_bundles": names, "excluded_tools": spec["excluded"],
        }
    return parse_config(
        {
            "daemon": {"state_dir": STATE},
            "providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}},
            "mcp": {
                "servers": {s: {"transport": "stdio", "command": "true"} for s in OFFER},
                "bundles": bundles,
            },
            "agents": agent_tables,
        }
    )


def granted(spec: dict[str, object]) -> set[str]:
    """Every `<server>__<tool>` some bundle of the agent names (before any other narrowing)."""
    out = set()
    for b in spec["bundles"]:  # type: ignore[attr-defined]
        for server in b["servers"]:
            out |= {f"{server}__{t}" for t, _ in OFFER[server] if any(fnmatchcase(t, p) for p in b["patterns"])}
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=agent_st,
    b=agent_st,
    path=st.sampled_from(list(ConstructionPath)),
    allowed=st.none() | st.frozensets(st.sampled_from(["kit__*", "db__query", "tool_search", "*"]), max_size=2),
)
def test_two_agents_never_share_an_mcp_tool_neither_bundle_grants(
    a: dict[str, object], b: dict[str, object], path: ConstructionPath, allowed: frozenset[str] | None
) -> None:
    config = make_config({"a": a, "b": b})
    services = Services(mcp=OfferedPool(config))
    mcp_names = {f"{s}__{t}" for s, tools in OFFER.items() for t, _ in tools}
    registries = {}
    for agent in ("a", "b"):
        registries[agent] = set(build_on_path(config, agent, path, services).tools.names) & mcp_names
    for agent, spec in (("a", a), ("b", b)):
        assert registries[agent] <= granted(spec)  # only what its own bundles name
    assert registries["a"] & registries["b"] <= granted(a) & granted(b)
    # a caller's allowlist only narrows what the bundles grant
    baseline = set(build_cli_run(config, "a", services).tools.names) & mcp_names
    narrowed = set(build_cli_run(config, "a", services, caller_allowed=allowed).tools.names) & mcp_names
    assert narrowed <= baseline <= granted(a)


def test_the_fixed_offer_is_really_gated() -> None:
    """The property is not vacuous: bundles over the fixed offer do grant, per agent."""
    spec_a = {"bundles": [{"servers": ["kit"], "patterns": ["echo"], "mode": "eager"}], "excluded": [],
              "autonomy": "full"}
    spec_b = {"bundles": [{"servers": ["db"], "patterns": ["*"], "mode": "deferred"}], "excluded": [],
              "autonomy": "full"}
    config = make_config({"a": spec_a, "b": spec_b})
    services = Services(mcp=OfferedPool(config))
    a = build_cli_run(config, "a", services)
    b = build_cli_run(config, "b", services)
    assert [n for n in a.tools.names if "__" in n] == ["kit__echo"]
    assert b.tools.deferred == {"db__query", "db__drop"} and "kit__echo" not in b.tools
