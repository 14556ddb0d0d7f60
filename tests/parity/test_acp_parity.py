"""L2 parity for the ACP path: a real `orchestrator acp` turn resolves cli-run's policy modulo its knobs.

The ACP execution lives in a subprocess, so it is observed twice: its describe() through
`orchestrator policy A --path acp --json`, and the tool specs its real turn sent the
provider, which must be exactly that listing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.config import Config
from orchestrator.policy import Interactivity
from orchestrator.seam import PATH_PROFILES, ConstructionPath, ResolvedAgentExecution
from tests.acp.harness import RecordingClient, acp_agent, initialize, prompt
from tests.fakes.openai_server import FakeOpenAI, text
from tests.parity.test_l2_paths import _in_thread, comparable, declared, run_cli

pytestmark = pytest.mark.slow

MEMORY_TOOLS = ["memory_forget", "memory_recall", "memory_store"]


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_acp_turn_resolves_cli_run_policy_modulo_its_knobs(
    agent: str,
    fake_llm: FakeOpenAI,
    parity_config: Callable[[FakeOpenAI], tuple[Path, Config]],
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = parity_config(fake_llm)
    fake_llm.script(text("from cli"), text("from acp"))
    code, _ = await _in_thread(run_cli, ["agent", agent, "-m", "hi", "--config", str(path)], capsys)
    assert code == 0
    (cli_run,) = seen
    client = RecordingClient()
    async with acp_agent(path, agent, client) as (conn, _):
        await initialize(conn)
        session = await conn.new_session(cwd=str(path.parent))
        done = await conn.prompt(session_id=session.session_id, prompt=prompt("hi"))
    assert (done.stop_reason, client.reply()) == ("end_turn", "from acp")
    code, out = await _in_thread(run_cli, ["policy", agent, "--path", "acp", "--json", "--config", str(path)], capsys)
    acp = json.loads(out)
    # same resolved policy as cli-run, differing only by the declared ACP knobs
    assert acp["path"] == "acp"
    assert comparable(acp) == declared(ConstructionPath.ACP, comparable(cli_run.describe()))
    assert acp["assembly"] == {**cli_run.assembly.describe(), "connect_mcp": False, "exclude_memory": True}
    assert acp["approval"]["interactivity"] == PATH_PROFILES[ConstructionPath.ACP].interactivity.value
    assert PATH_PROFILES[ConstructionPath.ACP].interactivity is Interactivity.INTERACTIVE
    # what the real ACP turn sent the provider is exactly that listing, with cli-run's specs
    cli_request, acp_request = fake_llm.requests
    sent = [t["function"]["name"] for t in acp_request.get("tools", [])]
    assert sent == acp["tools"]
    assert acp_request.get("tools", []) == [
        t for t in cli_request.get("tools", []) if t["function"]["name"] in acp["tools"]
    ]
    assert (acp_request["model"], acp_request["temperature"]) == (acp["model"], acp["temperature"])
    assert acp_request["messages"][0] == cli_request["messages"][0]  # the same system prompt
    # the declared difference is live: cli-run grants ops its memory tools, ACP strips them
    stripped = [t for t in cli_run.tools.names if t not in acp["tools"]]
    assert stripped == (MEMORY_TOOLS if agent == "ops" else [])
    assert "arm__status" in sent  # peripherals stay (registered, opened on first call only)
