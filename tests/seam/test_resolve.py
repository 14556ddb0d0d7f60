"""resolve(): caching per generation, env overrides, knobs, errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from orchestrator.config import Config
from orchestrator.errors import UnknownAgent
from orchestrator.seam import ConstructionPath, RuntimeKnobs, ScopedAssembly, Services, resolve

CONFIG = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
base_url_env = "ORCH_TEST_BASE_URL"
model_env = "ORCH_TEST_MODEL"

[agents.a]
provider = "p"
model = "m"
tools = ["*"]
acp_enable_mcp = true

[agents.a.http_fetch]
allowed_hosts = ["docs.example.com"]

[agents.a.memory]
scope = "agent"

[agents.b]
provider = "p"
model = "m"
"""


def test_resolve_is_cached_per_config_generation(load: Callable[..., Config]) -> None:
    services = Services()
    first = load(CONFIG)
    one = resolve(first, "a", path=ConstructionPath.CHANNEL, services=services)
    assert resolve(first, "a", path=ConstructionPath.CHANNEL, services=services) is one
    assert resolve(first, "a", path=ConstructionPath.CLI_RUN, services=services) is not one
    second = load(CONFIG)
    fresh = resolve(second, "a", path=ConstructionPath.CHANNEL, services=services)
    assert fresh is not one and fresh.tools.names == one.tools.names


def test_provider_env_overrides(load: Callable[..., Config], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_TEST_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("ORCH_TEST_MODEL", "other-model")
    execution = resolve(load(CONFIG), "a", path=ConstructionPath.CLI_RUN, services=Services())
    assert (execution.model.base_url, execution.model.model) == ("http://127.0.0.1:1234/v1", "other-model")


def test_unknown_agent(load: Callable[..., Config]) -> None:
    with pytest.raises(UnknownAgent, match="unknown agent 'zed' \\(configured: a, b\\)"):
        resolve(load(CONFIG), "zed", path=ConstructionPath.CLI_RUN, services=Services())


def test_acp_knobs_follow_the_agent(load: Callable[..., Config]) -> None:
    config = load(CONFIG)
    services = Services()
    acp_a = resolve(config, "a", path=ConstructionPath.ACP, services=services)
    acp_b = resolve(config, "b", path=ConstructionPath.ACP, services=services)
    assert acp_a.assembly.connect_mcp is True  # acp_enable_mcp = true
    assert acp_b.assembly.connect_mcp is False
    assert acp_a.assembly.exclude_memory and acp_a.memory.mode == "none"
    assert resolve(config, "a", path=ConstructionPath.CHANNEL, services=services).memory.mode == "agent"


def test_caller_knobs_cannot_reopen_what_a_path_withholds(load: Callable[..., Config]) -> None:
    config = load(CONFIG)
    wide = ScopedAssembly(connect_mcp=True, connect_peripherals=True, exclude_memory=False)
    listing = resolve(config, "b", path=ConstructionPath.LISTING, services=Services(), assembly=wide)
    acp = resolve(config, "b", path=ConstructionPath.ACP, services=Services(), assembly=wide)
    assert listing.assembly.connect_peripherals is False
    assert (acp.assembly.connect_mcp, acp.assembly.exclude_memory) == (False, True)


def test_ceiling_only_lowers_budgets(load: Callable[..., Config]) -> None:
    ceiling = RuntimeKnobs(
        max_tool_iterations=3, turn_timeout_s=1000, tool_timeout_s=5, max_tool_result_chars=10**6,
        max_history_messages=2, max_actions_per_hour=10**6, max_tokens_per_turn=500, max_tokens_per_day=10**9,
    )
    execution = resolve(load(CONFIG), "a", path=ConstructionPath.DELEGATE, services=Services(), ceiling=ceiling)
    knobs = execution.knobs
    assert (knobs.max_tool_iterations, knobs.turn_timeout_s, knobs.tool_timeout_s) == (3, 300.0, 5)
    assert (knobs.max_tool_result_chars, knobs.max_history_messages, knobs.max_actions_per_hour) == (16000, 2, 120)
    assert (knobs.max_tokens_per_turn, knobs.max_tokens_per_day) == (500, 20_000_000)


def test_default_workspace_is_per_agent_beside_state_dir_never_inside(load: Callable[..., Config]) -> None:
    config = load(CONFIG)
    services = Services()
    a = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services).security.workspace
    b = resolve(config, "b", path=ConstructionPath.CLI_RUN, services=services).security.workspace
    state = config.state_path()
    assert a == state.with_name(f"{state.name}-workspaces") / "a" and a.is_dir()
    assert a != b
    # the databases' directory is no ancestor: `../..` from a workspace never reaches them
    assert state not in a.parents
