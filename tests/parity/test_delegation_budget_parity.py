"""L2 parity for the one budget ledger per (agent, sender): delegated tokens count against the caller's day.

Issue 32: agent `a` capped at 3,000 tokens a day showed 780 used while its sender's
delegated turns had cost 7,530 more on `b`, under `b`'s budget only. Here `lead` may spend
1,000 tokens a day; its first call (110 tokens) delegates to `helper`, whose answer costs
900 under `helper`'s own 20 M day. Counted for `lead`, its day is spent (1,010), so its next
call is never made, on every path that can delegate, each driven through its production
entry point; before the fix the lead's day read 110 and the call was made.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import pytest

import orchestrator
from orchestrator import cli
from orchestrator.scheduler import start_schedules
from tests.acp.harness import RecordingClient, acp_agent, initialize, prompt
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call, with_usage
from tests.gateway.kit import call, serving, write

pytestmark = pytest.mark.slow

PATHS: Final = ("channel", "cli_run", "gateway_chat", "library", "sop_step", "acp", "schedule", "delegate")
SPENT: Final = "the daily token budget of 1000 tokens for 'lead' is spent (1010 used in the last 24 hours)"


def ledger_toml(base_url: str) -> str:
    """Return a config where `lead` (1,000 tokens a day) delegates to `helper` (the default day)."""
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[gateway]
port = 0

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

[agents.lead.budget]
max_tokens_per_day = 1000

[agents.helper]
provider = "fake"
model = "helper-model"

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


def lead_and_helper() -> tuple[Reply, Reply]:
    return (
        with_usage(tool_call("delegate", {"agent": "helper", "task": "look"}), prompt=100, completion=10),
        with_usage(text("helped"), prompt=800, completion=100),
    )


def script(fake: FakeOpenAI) -> None:
    # a third reply answers the lead's next call if it is made (it must not be)
    fake.script(*lead_and_helper(), text("lead done"))


async def _channel(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    async with running(config, user="u1") as (_, terms):
        terms["term"].type("go")
        lines = await terms["term"].screen.wait_for(lambda shown: any("Stopped" in l or "lead done" in l for l in shown))
    return "\n".join(lines)


async def _cli_run(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    await asyncio.to_thread(cli.main, ["agent", "lead", "-m", "go", "--config", str(config)])
    return ""


async def _gateway_chat(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    async with serving(config) as (_, gateway):
        status, body, _ = await call(gateway, "POST", "/api/agents/lead/messages", json={"text": "go"})
    assert status == 200
    return str(body["reply"])


async def _library(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    async with orchestrator.Agent.from_config(config, "lead") as lead:
        return (await lead.run("go")).text


async def _sop_step(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    await asyncio.to_thread(cli.main, ["sop", "handoff", "--config", str(config)])
    return ""


async def _acp(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    client = RecordingClient()
    async with acp_agent(config, "lead", client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(config.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("go"))
    assert done.stop_reason == "max_tokens"  # what ACP calls a token budget's stop
    return client.reply()


async def _schedule(config: Path, fake: FakeOpenAI) -> str:
    script(fake)
    async with running(config, user="u1") as (runtime, _):
        runner = await start_schedules(runtime)
        runner.fire_now("nightly")
        async with asyncio.timeout(20):  # the run ends once the lead's turn is stopped (or answered)
            while len(fake.requests) < 2 or runner.busy:
                await asyncio.sleep(0.02)
    return ""


async def _delegate(config: Path, fake: FakeOpenAI) -> str:
    # top -> lead -> helper: the lead's turn is itself on the delegate path, and so charged to top too
    fake.script(
        with_usage(tool_call("delegate", {"agent": "lead", "task": "pass it on"}), prompt=50, completion=5),
        *lead_and_helper(), text("lead done"), text("top done"),
    )
    await asyncio.to_thread(cli.main, ["agent", "top", "-m", "go", "--config", str(config)])
    return ""


RUNS: Final = {
    "channel": _channel, "cli_run": _cli_run, "gateway_chat": _gateway_chat, "library": _library,
    "sop_step": _sop_step, "acp": _acp, "schedule": _schedule, "delegate": _delegate,
}


@pytest.mark.parametrize("path", PATHS)
async def test_a_delegated_turns_tokens_spend_the_callers_day_on_every_delegating_path(
    path: str, tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    config = write(tmp_path, ledger_toml(fake_llm.base_url))
    reply = await RUNS[path](config, fake_llm)
    models = [r["model"] for r in fake_llm.requests if r["model"] != "top-model"]
    # the helper's 900 tokens spent the lead's day: the lead's next call was never made
    assert models == ["lead-model", "helper-model"], path
    if reply:
        assert SPENT in reply, path
