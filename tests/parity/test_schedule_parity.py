"""L2 parity for the schedule path: a run fired by the real scheduler resolves the cli-run
policy, differing only by its declared knobs (caller_allowed = the schedule's `tools`) and
its interactivity (never an operator)."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.policy import Interactivity
from orchestrator.scheduler import start_schedules
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, ScopedAssembly, Services, resolve
from tests.conftest import WriteConfig
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text
from tests.parity.conftest import parity_toml
from tests.parity.test_l2_paths import comparable

# ops's grant is file_read, list_dir, shell, memory tools, arm__*; the schedule keeps two of
# them and names one the agent lacks (never added).
NARROWING = ("file_read", "arm__status", "http_fetch")


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_schedule_path_resolves_cli_run_policy_modulo_narrowing(
    agent: str, fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution]
) -> None:
    tools = ", ".join(f'"{t}"' for t in NARROWING)
    path = write_config(
        parity_toml(fake_llm.base_url)
        + f'\n[[schedules]]\nname = "narrow"\nagent = "{agent}"\ncron = "0 0 1 1 *"\nprompt = "go"\n'
        f"tools = [{tools}]\n"
        + f'\n[[schedules]]\nname = "whole"\nagent = "{agent}"\ncron = "0 0 1 1 *"\nprompt = "go"\n'
    )
    fake_llm.script(text("narrow done"), text("whole done"))
    async with running(path) as (runtime, _):
        runner = await start_schedules(runtime)
        runner.fire_now("narrow")
        async with asyncio.timeout(10):
            while len(seen) < 1 or runner.busy:
                await asyncio.sleep(0.02)
        runner.fire_now("whole")
        async with asyncio.timeout(10):
            while len(seen) < 2 or runner.busy:
                await asyncio.sleep(0.02)
        services = Services(memory=runtime.services.memory, peripherals=runtime.services.peripherals)
        cli_run = resolve(runtime.config, agent, path=ConstructionPath.CLI_RUN, services=services)
        cli_narrowed = resolve(
            runtime.config, agent, path=ConstructionPath.CLI_RUN, services=services,
            assembly=ScopedAssembly(caller_allowed=frozenset(NARROWING)),
        )
    narrow, whole = seen
    for execution in (narrow, whole):
        assert execution.identity.path is ConstructionPath.SCHEDULE
        assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    # no `tools`: exactly the cli-run policy (modulo path identity and interactivity)
    assert comparable(whole.describe()) == comparable(cli_run.describe())
    assert whole.assembly.caller_allowed is None
    # `tools`: exactly cli run with the same --allow, i.e. the grant intersected, nothing added
    assert comparable(narrow.describe()) == comparable(cli_narrowed.describe())
    assert narrow.assembly.caller_allowed == frozenset(NARROWING)
    assert set(narrow.tools.names) == set(cli_run.tools.names) & set(NARROWING)
    assert "http_fetch" not in narrow.tools
    assert "file_read" in narrow.tools and "arm__status" in narrow.tools
    # what the provider was sent is exactly each registry
    first, second = fake_llm.requests
    assert first["tools"] == list(narrow.tools.provider_specs())
    assert second["tools"] == list(whole.tools.provider_specs())
    assert (first["model"], first["temperature"]) == (narrow.model.model, narrow.model.temperature)
