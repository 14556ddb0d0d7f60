"""L2 path parity: every construction path hands the engine the same resolved policy.

The paths that have a real entry point today (cli run: `orchestrator agent`; listing:
`orchestrator tools` / `orchestrator policy --path listing`) are driven through it. Paths
whose entry points later issues build are resolved at the seam with their declared knobs,
so the day an entry point lands it inherits an already-asserted contract.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import cli
from orchestrator.config import Config
from orchestrator.peripherals import PeripheralPool
from orchestrator.policy import Interactivity
from orchestrator.seam import (
    PATH_PROFILES,
    ConstructionPath,
    InteractivityNotAllowed,
    ResolvedAgentExecution,
    Services,
    resolve,
)
from tests.fakes.openai_server import FakeOpenAI, text

# What a path may differ in, and why (its declared knobs). Anything else must be equal.
PER_PATH_KEYS = ("path", "assembly")
DECLARED_DIFFERENCES: dict[ConstructionPath, dict[str, Any]] = {
    # ACP fast boot: MCP withheld (connect_mcp=False) and memory stripped (exclude_memory).
    # The memory tools go with the memory scope (absent from a baseline resolved without a store).
    ConstructionPath.ACP: {
        "memory": {"mode": "none", "read_from": []},
        "mcp_bundles": [],
        "tools": lambda tools: [t for t in tools if not t.startswith("memory_")],
    },
    # Listing never opens hardware (connect_peripherals=False): the peripheral tools are absent.
    ConstructionPath.LISTING: {"tools": lambda tools: [t for t in tools if not t.startswith("arm__")]},
}


def declared(path: ConstructionPath, baseline: dict[str, Any]) -> dict[str, Any]:
    """Return what `path` must resolve: the baseline with the path's declared differences applied."""
    changes = DECLARED_DIFFERENCES.get(path, {})
    return {**baseline, **{k: v(baseline[k]) if callable(v) else v for k, v in changes.items()}}


def comparable(described: dict[str, Any]) -> dict[str, Any]:
    """Drop the per-path identity fields and the interactivity (declared per path)."""
    out = {k: v for k, v in described.items() if k not in PER_PATH_KEYS}
    out["approval"] = {k: v for k, v in out["approval"].items() if k != "interactivity"}
    return out


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_cli_run_and_listing_resolve_the_same_policy(
    agent: str,
    fake_llm: FakeOpenAI,
    parity_config: Callable[[FakeOpenAI], tuple[Path, Config]],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = parity_config(fake_llm)
    fake_llm.script(text("hello from the model"))
    code, out = await _in_thread(run_cli, ["agent", agent, "-m", "hi", "--config", str(path)], capsys)
    assert (code, out) == (0, "hello from the model\n")
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.CLI_RUN
    argv = ["policy", agent, "--path", "listing", "--json", "--config", str(path)]
    code, listing_policy = await _in_thread(run_cli, argv, capsys)
    listed = json.loads(listing_policy)
    assert comparable(listed) == declared(ConstructionPath.LISTING, comparable(execution.describe()))
    assert listed["assembly"] == {**execution.assembly.describe(), "connect_peripherals": False}
    code, tools_json = await _in_thread(run_cli, ["tools", agent, "--json", "--config", str(path)], capsys)
    listed_names = [row["name"] for row in json.loads(tools_json)]
    assert listed_names == declared(ConstructionPath.LISTING, {"tools": list(execution.tools.names)})["tools"]
    assert "arm__status" in execution.tools and "arm__status" not in listed_names  # the knob is live
    # the model binding the provider actually received
    request = fake_llm.requests[0]
    assert request["model"] == execution.model.model == f"{agent}-model"
    assert request["temperature"] == execution.model.temperature


async def test_provider_is_sent_exactly_the_registry(
    fake_llm: FakeOpenAI,
    parity_config: Callable[[FakeOpenAI], tuple[Path, Config]],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = parity_config(fake_llm)
    fake_llm.script(text("ok"))
    code, _ = await _in_thread(run_cli, ["agent", "ops", "-m", "hi", "--config", str(path)], capsys)
    assert code == 0
    (execution,) = seen
    request = fake_llm.requests[0]
    assert request["tools"] == list(execution.tools.provider_specs())
    assert [t["function"]["name"] for t in request["tools"]] == [
        "arm__move", "arm__status", "file_read", "list_dir", "memory_forget", "memory_recall", "memory_store", "shell",
    ]
    assert request["messages"][0] == {"role": "system", "content": "You are ops."}


async def test_cli_allow_only_narrows(
    fake_llm: FakeOpenAI,
    parity_config: Callable[[FakeOpenAI], tuple[Path, Config]],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = parity_config(fake_llm)
    # Asking for tools the agent does not hold never adds them: it is an error, and no turn runs.
    argv = ["agent", "ops", "-m", "hi", "--allow", "shell,http_fetch", "--allow", "file_write", "--config", str(path)]
    code = await _in_thread(cli.main, argv)
    assert code == 1
    assert capsys.readouterr().err.startswith("error: --allow 'file_write' matches no tool agent 'ops' holds")
    assert seen == [] and fake_llm.requests == []
    fake_llm.script(text("ok"))
    argv = ["agent", "ops", "-m", "hi", "--allow", "shell,sh*", "--allow", "shell", "--config", str(path)]
    code, _ = await _in_thread(run_cli, argv, capsys)
    assert code == 0
    (execution,) = seen
    assert execution.tools.names == ("shell",)
    assert [t["function"]["name"] for t in fake_llm.requests[0]["tools"]] == ["shell"]
    assert execution.assembly.caller_allowed == frozenset({"shell", "sh*"})


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_every_path_resolves_identical_policy_modulo_knobs(
    agent: str, fake_llm: FakeOpenAI, parity_config: Callable[[FakeOpenAI], tuple[Path, Config]]
) -> None:
    _, config = parity_config(fake_llm)
    # an unentered pool: it registers peripheral tools but can never open a port
    services = Services(peripherals=PeripheralPool())
    baseline = comparable(resolve(config, agent, path=ConstructionPath.CLI_RUN, services=services).describe())
    for path in ConstructionPath:
        described = comparable(resolve(config, agent, path=path, services=services).describe())
        assert described == declared(path, baseline), path
    # the declared listing difference is live: the peripheral tools exist on every other path
    # (the intern, read_only, keeps only the read-only command)
    assert [t for t in baseline["tools"] if t.startswith("arm__")] == (
        ["arm__move", "arm__status"] if agent == "ops" else ["arm__status"]
    )
    # the values really are the agent's own, not defaults
    assert baseline["knobs"]["max_tool_iterations"] == (7 if agent == "ops" else 10)
    assert baseline["memory"] == (
        {"mode": "agent", "read_from": ["intern"]} if agent == "ops" else {"mode": "none", "read_from": []}
    )


def test_interactivity_is_declared_per_path(
    fake_llm: FakeOpenAI, parity_config: Callable[[FakeOpenAI], tuple[Path, Config]]
) -> None:
    _, config = parity_config(fake_llm)
    services = Services()
    for path, profile in PATH_PROFILES.items():
        execution = resolve(config, "ops", path=path, services=services)
        assert execution.approvals.interactivity is profile.interactivity
        for mode in Interactivity:
            if mode not in profile.allowed_interactivity:
                with pytest.raises(InteractivityNotAllowed):
                    resolve(config, "ops", path=path, services=services, interactivity=mode)
    # the surfaces that can never reach a human
    for path in (ConstructionPath.GATEWAY_CHAT, ConstructionPath.SCHEDULE, ConstructionPath.LISTING):
        assert PATH_PROFILES[path].allowed_interactivity == {Interactivity.NON_INTERACTIVE}


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking CLI entry point (it calls asyncio.run) off the test's event loop."""
    import asyncio

    return await asyncio.to_thread(fn, *args)


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_channel_path_resolves_the_same_policy(
    agent: str,
    fake_llm: FakeOpenAI,
    write_config: Callable[..., Path],
    seen: list[ResolvedAgentExecution],
) -> None:
    from tests.daemon.harness import running
    from tests.parity.conftest import parity_toml

    path = write_config(
        parity_toml(fake_llm.base_url)
        + f'\n[channels.term]\nkind = "terminal"\nuser = "u1"\n'
        f'[[routes]]\nchannel = "term"\nagent = "{agent}"\nsenders = ["u1"]\n'
    )
    fake_llm.script(text("from the channel"))
    async with running(path) as (runtime, terms):
        terms["term"].type("hi")
        await terms["term"].screen.wait_for(lambda lines: "from the channel" in lines)
        cli_run = resolve(
            runtime.config, agent, path=ConstructionPath.CLI_RUN,
            services=Services(memory=runtime.services.memory, peripherals=runtime.services.peripherals),
        )
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.CHANNEL
    assert execution.approvals.interactivity is Interactivity.CHANNEL_PROMPT
    assert comparable(execution.describe()) == comparable(cli_run.describe())
    assert "arm__status" in execution.tools  # the daemon registers peripherals (opened on first call)
    request = fake_llm.requests[0]
    assert request.get("tools", []) == list(execution.tools.provider_specs())
    assert (request["model"], request["temperature"]) == (execution.model.model, execution.model.temperature)
