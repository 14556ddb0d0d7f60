"""The CLI's MCP parts: `check --connect`, and `agent` / `tools` connecting what an agent needs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import cli
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI
from tests.mcp.kit import agent_toml, bundle, stdio_kit

pytestmark = pytest.mark.slow

BROKEN = '[mcp.servers.broken]\ntransport = "stdio"\ncommand = "/nonexistent/mcp-server"\n'


async def test_check_connect_lists_offers_and_reports_names_matching_nothing(
    write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI(models=("m-a",)) as llm:
        good = write_config(
            provider_toml(llm.base_url)
            + stdio_kit()
            + bundle("b", servers={"kit": ["echo", "write_*"]}, pinned={"kit": ["memo://*"]})
            + agent_toml("a", bundles=["b"])
        )
        assert await asyncio.to_thread(cli.main, ["check", "--connect", "--config", str(good)]) == 0
        out, err = capsys.readouterr()
        assert out.splitlines() == [
            "mcp server kit (stdio): 12 tools (5 read-only), 2 resources",
            "  tools: counts, crash, echo, env_value, garbage, hang, header_value, pid, secret_op, unlock, "
            "wipe_notes, write_note",
            "  resources: memo://notes, memo://private",
            f"provider fake (openai) at {llm.base_url}: serves m-a",
            f"{good}: ok (1 agents, 1 providers, 0 channels, 0 routes)",
        ]
        assert err == ""

        bad = write_config(
            provider_toml(llm.base_url)
            + stdio_kit()
            + BROKEN
            + bundle("b", servers={"kit": ["echo", "nope*", "ech"], "broken": ["*"]}, pinned={"kit": ["file://*"]})
            + agent_toml("a", bundles=["b"])
        )
        assert await asyncio.to_thread(cli.main, ["check", "--connect", "--config", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert "mcp server kit (stdio): 12 tools (5 read-only), 2 resources" in out
    assert err.splitlines() == [
        f"{bad}: mcp.servers.broken: cannot connect: cannot start the command: No such file or directory",
        f"{bad}: mcp.bundles.b.tools.kit[1]: pattern 'nope*' matches no tool of MCP server 'kit'",
        f"{bad}: mcp.bundles.b.tools.kit[2]: tool 'ech' matches no tool of MCP server 'kit' (did you mean 'echo'?)",
        f"{bad}: mcp.bundles.b.pinned_resources.kit[0]: pattern 'file://*' matches no resource of MCP server 'kit'",
    ]
    assert ": ok (" not in out


def test_a_server_that_will_not_start_is_one_error_line(
    write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(
        provider_toml("http://127.0.0.1:9/v1")
        + BROKEN
        + bundle("b", servers={"broken": ["*"]})
        + agent_toml("a", bundles=["b"])
        + agent_toml("none", bundles=[])
    )
    expected = (
        "error: MCP server 'broken' is unavailable: cannot start the command: No such file or directory "
        "(check [mcp.servers.broken], or run `orchestrator check --connect`)\n"
    )
    for argv in (["agent", "a", "-m", "hi"], ["tools", "a"], ["policy", "a"]):
        assert cli.main([*argv, "--config", str(path)]) == 1
        assert capsys.readouterr().err == expected
    # The ACP path withholds MCP, so nothing is connected (and nothing fails) there.
    assert cli.main(["tools", "a", "--path", "acp", "--json", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_tools_marks_deferred_mcp_tools(write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(
        provider_toml("http://127.0.0.1:9/v1")
        + stdio_kit()
        + bundle("now", servers={"kit": ["echo"]})
        + bundle("later", servers={"kit": ["write_note"]}, mode="deferred")
        + agent_toml("a", bundles=["now", "later"])
    )
    assert cli.main(["tools", "a", "--json", "--config", str(path)]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["kit__echo"]["deferred"] is False and rows["kit__write_note"]["deferred"] is True
    assert rows["tool_search"]["deferred"] is False  # the way to reach the deferred ones
    assert cli.main(["tools", "a", "--config", str(path)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "(deferred: via tool_search)" in lines["kit__write_note"]  # the description follows it
    assert "deferred" not in lines["kit__echo"]
