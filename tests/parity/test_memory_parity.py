"""Memory parity: the same memory scope and tools on every construction path, through real entry points.

`orchestrator agent` (cli run), `orchestrator tools` / `policy --path listing` (listing) and
`process_message` (channel) each open the state dir's memory store and must agree with each
other and with what the provider was sent. Paths whose entry points later issues build are
resolved at the seam over one store; they may differ only by declared knobs (ACP strips
memory: `exclude_memory`). Memories written on one path are read on another, within scope.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from channels import Inbound
from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.daemon import Disposition, process_message
from orchestrator.memory import MemoryStore
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

# agent -> (its memory settings, the memory tools its registry must hold)
AGENTS: dict[str, tuple[str, list[str]]] = {
    "alice": ('autonomy = "full"\nmemory = { scope = "agent", read_from = ["bob"] }\n',
              ["memory_forget", "memory_recall", "memory_store"]),
    "bob": ('autonomy = "full"\nmemory = { scope = "agent" }\n', ["memory_forget", "memory_recall", "memory_store"]),
    "carol": ('autonomy = "read_only"\nmemory = { scope = "agent" }\n', ["memory_recall"]),
    "erin": ('excluded_tools = ["memory_forget"]\nmemory = { scope = "agent" }\n'
             '[agents.erin.approval]\nauto_approve = ["memory_*"]\n', ["memory_recall", "memory_store"]),
    "dave": ('autonomy = "full"\ntools = ["*"]\n[agents.dave.http_fetch]\nallowed_hosts = ["docs.example.com"]\n', []),
}


def memory_toml(fake: FakeOpenAI) -> str:
    body = provider_toml(fake.base_url)
    for name, (extra, _) in AGENTS.items():
        body += f'\n[agents.{name}]\nprovider = "fake"\nmodel = "m-{name}"\n' + extra
    body += '\n[channels.term]\nkind = "terminal"\nuser = "u-alice"\n'
    for name in AGENTS:
        body += f'[[routes]]\nchannel = "term"\nagent = "{name}"\nsenders = ["u-{name}"]\n'
    return body


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


def memory_names(names: Any) -> list[str]:
    return [n for n in names if n.startswith("memory_")]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def channel_turn(runtime: Any, agent: str, n: int) -> None:
    inbound = Inbound(is_direct=True, channel="term", chat="terminal", sender=f"u-{agent}", text="hi", event_id=f"{agent}{n}")
    assert await process_message(runtime, inbound) is Disposition.ANSWERED


async def test_memory_scope_is_identical_on_cli_run_listing_and_channel(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(memory_toml(fake_llm))
    cli_run: dict[str, ResolvedAgentExecution] = {}
    for agent, (_, expected) in AGENTS.items():
        fake_llm.script(text("ok"))
        argv = ["agent", agent, "-m", "hi", "--config", str(path)]
        assert await asyncio.to_thread(run_cli, argv, capsys) == (0, "ok\n")
        cli_run[agent] = execution = seen.pop()
        assert memory_names(execution.tools.names) == expected, agent
        sent = [t["function"]["name"] for t in fake_llm.requests[-1].get("tools", [])]
        assert sent == list(execution.tools.names)  # the provider got exactly the registry
        code, listed = await asyncio.to_thread(run_cli, ["tools", agent, "--json", "--config", str(path)], capsys)
        rows = json.loads(listed)
        assert [r["name"] for r in rows] == list(execution.tools.names), agent
        assert {r["name"]: r["source"] for r in rows if r["source"] == "memory"} == dict.fromkeys(expected, "memory")
        code, policy = await asyncio.to_thread(run_cli, ["policy", agent, "--path", "listing", "--json", "--config", str(path)], capsys)
        assert json.loads(policy)["memory"] == execution.describe()["memory"]
    async with running(path) as (runtime, _):
        for n, agent in enumerate(AGENTS):
            fake_llm.script(text("ok"))
            await channel_turn(runtime, agent, n)
            channel = seen.pop()
            assert channel.identity.path is ConstructionPath.CHANNEL
            assert channel.tools.names == cli_run[agent].tools.names, agent
            assert channel.describe()["memory"] == cli_run[agent].describe()["memory"]
            sent = [t["function"]["name"] for t in fake_llm.requests[-1].get("tools", [])]
            assert sent == list(channel.tools.names)


async def test_every_seam_path_binds_the_same_memory_tools_modulo_exclude_memory(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    config = load_config(write_config(memory_toml(fake_llm)))
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        services = Services(memory=store)
        for agent, (_, expected) in AGENTS.items():
            for path in ConstructionPath:
                execution = resolve(config, agent, path=path, services=services)
                stripped = path is ConstructionPath.ACP  # exclude_memory, its declared knob
                assert memory_names(execution.tools.names) == ([] if stripped else expected), (agent, path)
                assert execution.memory.mode == ("none" if stripped or agent == "dave" else "agent"), (agent, path)
        await services.providers.aclose()


async def test_memory_written_on_cli_run_is_read_on_the_channel_only_within_scope(
    write_config: WriteConfig, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(memory_toml(fake_llm))
    fake_llm.script(tool_call("memory_store", {"text": "The release is frozen until Friday."}), text("noted"))
    argv = ["agent", "bob", "-m", "remember the freeze", "--config", str(path)]
    assert await asyncio.to_thread(run_cli, argv, capsys) == (0, "noted\n")
    assert tool_results(fake_llm.requests[-1]) == ["Stored memory #1."]
    recall = tool_call("memory_recall", {"query": "release freeze"})
    async with running(path) as (runtime, _):  # the daemon: a restart of the store, another path
        results = {}
        for n, agent in enumerate(("alice", "bob", "carol", "dave")):
            fake_llm.script(recall, text("ok"))
            await channel_turn(runtime, agent, n)
            results[agent] = tool_results(fake_llm.requests[-1])[-1]
        # bob's memory cannot be forgotten by alice, who may only read it
        fake_llm.script(tool_call("memory_forget", {"id": 1}), text("ok"))
        await channel_turn(runtime, "alice", 9)
        forgot = tool_results(fake_llm.requests[-1])[-1]
    hit = "- #1 (by bob): The release is frozen until Friday."
    assert hit in results["alice"] and hit in results["bob"]  # read_from, and its own
    assert results["alice"].startswith('<untrusted-data source="memory_recall">')
    assert "No memories match" in results["carol"] and "frozen" not in results["carol"]
    assert results["dave"] == "Error: tool 'memory_recall' is not available to this agent. It was not run."
    assert forgot == "Error: you have no memory #1 (only your own memories can be forgotten)"
    with MemoryStore(load_config(path).state_path() / "memory.sqlite3") as store:
        assert [r.agent for r in await store.recall("frozen", agents=("bob",), limit=5)] == ["bob"]
