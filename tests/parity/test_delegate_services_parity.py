"""L2 parity for what a `delegate` target is opened with: the same tools on every path that can delegate.

Each entry point opens its turn's services through `open_services(...)`; a target's memory
store and MCP servers must be there whichever entry point the delegating turn started from.
`helper` has memory and an MCP bundle, `lead` has neither (only `delegate`), so a path that
opens services for `lead` alone hands `helper` fewer tools. Every turn is driven through the
production entry point, and the evidence is what `helper`'s turn sent the provider.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import pytest

import orchestrator
from orchestrator import cli
from orchestrator.scheduler import start_schedules
from tests.acp.harness import RecordingClient, acp_agent, initialize, prompt
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.gateway.kit import call, serving, write
from tests.mcp.kit import bundle, sent_tools, stdio_kit

pytestmark = pytest.mark.slow

# helper's own grant: a built-in, its memory tools, and its bundle's MCP tool.
HELPER_TOOLS: Final = ["kit__echo", "list_dir", "memory_forget", "memory_recall", "memory_store"]
PATHS: Final = ("channel", "cli_run", "gateway_chat", "library", "sop_step", "acp", "schedule", "delegate")


def delegating_toml(base_url: str) -> str:
    """Return a config where `lead` (no memory, no MCP) delegates to `helper` (both)."""
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[gateway]
port = 0

{stdio_kit("kit")}
{bundle("echoing", servers={"kit": ["echo"]})}
[agents.top]
provider = "fake"
model = "top-model"
autonomy = "full"
tools = ["delegate"]
delegates = ["lead"]

[agents.lead]
provider = "fake"
model = "lead-model"
autonomy = "full"
tools = ["delegate"]
delegates = ["helper"]

[agents.helper]
provider = "fake"
model = "helper-model"
autonomy = "full"
tools = ["list_dir"]
mcp_bundles = ["echoing"]

[agents.helper.memory]
scope = "agent"

[channels.term]
kind = "terminal"
user = "u1"

[[routes]]
channel = "term"
agent = "lead"
senders = ["u1"]

[sops.handoff]
agent = "lead"
[[sops.handoff.steps]]
prompt = "hand it off"

[[schedules]]
name = "nightly"
agent = "lead"
cron = "0 0 1 1 *"
prompt = "hand it off"
"""


def script_lead(fake: FakeOpenAI) -> None:
    fake.script(tool_call("delegate", {"agent": "helper", "task": "look"}), text("helped"), text("lead done"))


async def _channel(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    async with running(config, user="u1") as (_, terms):
        terms["term"].type("go")
        await terms["term"].screen.wait_for(lambda lines: "lead done" in lines)


async def _cli_run(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    assert await asyncio.to_thread(cli.main, ["agent", "lead", "-m", "go", "--config", str(config)]) == 0


async def _gateway_chat(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    async with serving(config) as (_, gateway):
        status, body, _ = await call(gateway, "POST", "/api/agents/lead/messages", json={"text": "go"})
    assert (status, body["reply"]) == (200, "lead done")


async def _library(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    async with orchestrator.Agent.from_config(config, "lead") as lead:
        assert (await lead.run("go")).text == "lead done"


async def _sop_step(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    assert await asyncio.to_thread(cli.main, ["sop", "handoff", "--config", str(config)]) == 0


async def _acp(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    client = RecordingClient()
    async with acp_agent(config, "lead", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("go"))
    assert (done.stop_reason, client.reply()) == ("end_turn", "lead done")


async def _schedule(config: Path, fake: FakeOpenAI) -> None:
    script_lead(fake)
    async with running(config, user="u1") as (runtime, _):
        runner = await start_schedules(runtime)
        runner.fire_now("nightly")
        async with asyncio.timeout(20):
            while fake.pending or runner.busy:
                await asyncio.sleep(0.02)


async def _delegate(config: Path, fake: FakeOpenAI) -> None:
    # top -> lead -> helper: lead's delegate call is itself made on the delegate path
    fake.script(
        tool_call("delegate", {"agent": "lead", "task": "pass it on"}),
        tool_call("delegate", {"agent": "helper", "task": "look"}), text("helped"), text("lead done"),
        text("top done"),
    )
    assert await asyncio.to_thread(cli.main, ["agent", "top", "-m", "go", "--config", str(config)]) == 0


RUNS: Final = {
    "channel": _channel, "cli_run": _cli_run, "gateway_chat": _gateway_chat, "library": _library,
    "sop_step": _sop_step, "acp": _acp, "schedule": _schedule, "delegate": _delegate,
}


def helper_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.requests if r["model"] == "helper-model"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_delegate_target_gets_its_own_memory_and_mcp_tools_on_every_delegating_path(
    path: str, tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    config = write(tmp_path, delegating_toml(fake_llm.base_url))
    await RUNS[path](config, fake_llm)
    (request,) = helper_requests(fake_llm)
    assert sorted(sent_tools(request)) == HELPER_TOOLS, path
    # the lead's own turn never got the target's grant: only `delegate`
    lead = [r for r in fake_llm.requests if r["model"] == "lead-model"]
    assert lead and all(sent_tools(r) == ["delegate"] for r in lead)


async def test_the_listing_of_a_delegate_target_is_what_its_delegated_turn_is_sent(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, delegating_toml(fake_llm.base_url))
    await _library(config, fake_llm)
    (request,) = helper_requests(fake_llm)
    capsys.readouterr()
    argv = ["tools", "helper", "--path", "delegate", "--json", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, argv) == 0
    listed = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert sorted(listed) == sent_tools(request)


async def test_policy_matrix_opens_each_column_as_its_entry_point_does(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, delegating_toml(fake_llm.base_url))
    argv = ["policy", "matrix", "--agent", "helper", "--json", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, argv) == 0
    out = json.loads(capsys.readouterr().out)
    grid = out["agents"]["helper"]
    assert out["gaps"] == []
    # the delegate column runs under lead's services (lead has no memory): helper's memory is there
    assert grid["memory"]["delegate"] == grid["memory"]["library"] == grid["memory"]["sop_step"] == "enforced"
    assert grid["memory"]["acp"] == "narrowed: exclude_memory"  # helper's own ACP turn, not a delegated one
    assert not list(tmp_path.glob("state*/*.sqlite3*"))  # no store opened in the real state dir
