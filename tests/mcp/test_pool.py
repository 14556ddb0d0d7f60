"""The pool: one process per server across turns, per-agent isolation, list-changed refresh, close."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.mcp import ConnectionState
from orchestrator.seam import Services
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call
from tests.mcp.kit import (
    agent_toml,
    bundle,
    execution,
    mcp_names,
    mcp_services,
    pool_of,
    server_counts,
    stdio_kit,
    turn,
    wait_for,
)

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def invoke(services: Services, config: Config, agent: str, tool: str, **arguments: Any) -> str:
    found = execution(config, services, agent).tools.get(tool)
    assert found is not None, f"{agent} lacks {tool}"
    return await found.invoke(arguments)


async def test_per_agent_isolation_gives_each_agent_its_own_server_process(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(
        provider_toml("http://127.0.0.1:9/v1")
        + stdio_kit("kit", spawn_log=tmp_path / "kit")
        + stdio_kit("browser", spawn_log=tmp_path / "browser", isolation="per_agent")
        + bundle("b", servers={"kit": ["pid"], "browser": ["pid"]})
        + agent_toml("a", bundles=["b"])
        + agent_toml("b", bundles=["b"])
    )
    async with mcp_services(config, "a", "b") as services:
        browser_a = await invoke(services, config, "a", "browser__pid")
        browser_b = await invoke(services, config, "b", "browser__pid")
        kit_a = await invoke(services, config, "a", "kit__pid")
        kit_b = await invoke(services, config, "b", "kit__pid")
        pids = [int(p) for p in (tmp_path / "browser").read_text().split()]
    assert browser_a != browser_b and sorted(pids) == sorted([int(browser_a), int(browser_b)])
    assert kit_a == kit_b and (tmp_path / "kit").read_text().split() == [kit_a]


async def test_turns_reuse_one_server_process_and_exit_stops_it(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    def model(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        return text("done") if last["role"] == "tool" else tool_call("kit__echo", {"text": "x"})

    async with FakeOpenAI(default=model) as fake:
        config = load(
            provider_toml(fake.base_url)
            + stdio_kit(spawn_log=tmp_path / "spawns")
            + bundle("b", servers={"kit": ["echo"]})
            + agent_toml("a", bundles=["b"])
        )
        async with mcp_services(config, "a") as services:
            pool = pool_of(services)
            for _ in range(25):
                assert (await turn(config, services, "a")).executed == ("kit__echo",)
            assert (await server_counts(services))["echo"] == 25
        (pid,) = (tmp_path / "spawns").read_text().split()
    assert not alive(int(pid))
    assert [s.state for s in pool.status()] == [ConnectionState.CLOSED]


async def test_list_changed_refresh_regates_each_agent_without_a_restart(
    fake_llm: FakeOpenAI, load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(
        provider_toml(fake_llm.base_url)
        + stdio_kit(spawn_log=tmp_path / "spawns")
        + bundle("opener", servers={"kit": ["unlock", "late_*"]})
        + bundle("plain", servers={"kit": ["echo"]})
        + agent_toml("opener", bundles=["opener"])
        + agent_toml("other", bundles=["plain"])
    )
    async with mcp_services(config, "opener", "other") as services:
        pool = pool_of(services)
        before = execution(config, services, "opener")
        assert mcp_names(before.tools.names) == ["kit__unlock"]
        generation = pool.generation
        fake_llm.script(tool_call("kit__unlock", {}), text("unlocked"))
        await turn(config, services, "opener")
        await wait_for(lambda: pool.generation != generation)
        after = execution(config, services, "opener")
        assert mcp_names(after.tools.names) == ["kit__late_tool", "kit__unlock"]
        assert mcp_names(execution(config, services, "other").tools.names) == ["kit__echo"]
        fake_llm.script(tool_call("kit__late_tool", {}), text("ran"))
        result = await turn(config, services, "opener")
        assert result.executed == ("kit__late_tool",)
        assert [t["function"]["name"] for t in fake_llm.requests[2]["tools"]] == ["kit__late_tool", "kit__unlock"]
        assert (await server_counts(services))["late_tool"] == 1
    assert len((tmp_path / "spawns").read_text().split()) == 1


async def test_secret_references_in_env_are_resolved_when_connecting(
    load: Callable[..., Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kit.secret").write_text("from-a-file\n")
    config = load(
        provider_toml("http://127.0.0.1:9/v1")
        + stdio_kit(env={"KIT_TOKEN": "env:ORCH_TEST_KIT_TOKEN", "KIT_PASSWORD": "file:kit.secret",
                         "KIT_MODE": "plain"})
        + bundle("b", servers={"kit": ["env_value"]})
        + agent_toml("a", bundles=["b"])
    )
    monkeypatch.setenv("ORCH_TEST_KIT_TOKEN", "t0k3n")  # read at connect time, not at load
    async with mcp_services(config, "a") as services:
        seen = {name: await invoke(services, config, "a", "kit__env_value", name=name)
                for name in ("KIT_TOKEN", "KIT_PASSWORD", "KIT_MODE", "ORCH_TEST_KIT_TOKEN")}
    assert seen == {"KIT_TOKEN": "t0k3n", "KIT_PASSWORD": "from-a-file", "KIT_MODE": "plain",
                    "ORCH_TEST_KIT_TOKEN": "<unset>"}  # only the minimal environment is inherited


def test_literal_secrets_in_server_env_and_headers_are_config_errors(
    write_config: Callable[..., Path],
) -> None:
    from orchestrator.checks import load_config
    from orchestrator.errors import ConfigError

    path = write_config(
        '[mcp.servers.gh]\ntransport = "http"\nurl = "http://127.0.0.1:9/mcp"\n'
        'headers = { Authorization = "Bearer abc", X-Trace = "on" }\n'
        '[mcp.servers.local]\ntransport = "stdio"\ncommand = "x"\n'
        'env = { GITHUB_TOKEN = "ghp_literal", LOG_LEVEL = "debug", API_KEY = "env:" }\n'
        '[mcp.bundles.b]\nservers = ["gh"]\ntools = { gh = ["gh__search", "issues_*"] }\n'
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[agents.a]\nprovider = "p"\nmodel = "m"\nexcluded_tools = ["tool_search"]\n'
        '[agents.a.approval]\nalways_ask = ["tool_search", "gh__*"]\n'
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert [str(p) for p in raised.value.problems] == [
        f"{path}: mcp.servers.gh.headers.Authorization: 'Authorization' looks like a secret: give it "
        "as a reference ('env:NAME' or 'file:PATH'), not a literal value",
        f"{path}: mcp.servers.local.env.GITHUB_TOKEN: 'GITHUB_TOKEN' looks like a secret: give it as a "
        "reference ('env:NAME' or 'file:PATH'), not a literal value",
        f"{path}: mcp.servers.local.env.API_KEY: reference 'env:' names nothing after 'env:'",
        f"{path}: mcp.bundles.b.tools.gh[0]: list the server's own tool names: 'search', not 'gh__search'",
    ]
    # tool_search is a valid name for excluded_tools and the approval lists.
    assert not any("tool_search" in str(p) for p in raised.value.problems)
