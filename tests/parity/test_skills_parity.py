"""Skills parity: the same skill prompt sections and skill tools on every construction path.

Driven through the real entry points that exist (cli run: `orchestrator agent`; listing:
`orchestrator tools` / `orchestrator policy --path listing`; channel: the daemon's terminal
channel), and at the seam for the rest. No path knob touches skills except `caller_allowed`
(which intersects tools like any other), so every path must resolve identical values.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.policy import Interactivity
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.parity.test_l2_paths import comparable, declared
from tests.skills.kit import skills_toml, write_kit

EXPECTED_TOOLS = {
    "ops": ("list_dir", "notes__lookup", "notes__nap", "notes__publish", "notes__say"),
    "intern": (),
}
EXPECTED_SECTIONS = {"ops": ["skill:notes", "skill:docs"], "intern": ["skill:docs"]}


async def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = await asyncio.to_thread(cli.main, argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("agent", ["ops", "intern"])
async def test_skills_are_the_same_on_cli_run_listing_and_channel(
    agent: str,
    tmp_path: Path,
    fake_llm: FakeOpenAI,
    write_config: WriteConfig,
    seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.daemon.harness import running

    write_kit(tmp_path)
    path = write_config(
        skills_toml(fake_llm.base_url)
        + f'\n[channels.term]\nkind = "terminal"\nuser = "u1"\n'
        f'[[routes]]\nchannel = "term"\nagent = "{agent}"\nsenders = ["u1"]\n'
    )
    fake_llm.script(text("from the cli"), text("from the channel"))

    assert await run_cli(["agent", agent, "-m", "hi", "--config", str(path)], capsys) == (0, "from the cli\n")
    code, listing = await run_cli(["tools", agent, "--json", "--config", str(path)], capsys)
    assert code == 0
    code, policy = await run_cli(["policy", agent, "--path", "listing", "--json", "--config", str(path)], capsys)
    assert code == 0
    async with running(path) as (_, terms):
        terms["term"].type("hi")
        await terms["term"].screen.wait_for(lambda lines: "from the channel" in lines)

    cli_run, channel = seen
    assert (cli_run.identity.path, channel.identity.path) == (ConstructionPath.CLI_RUN, ConstructionPath.CHANNEL)
    assert channel.approvals.interactivity is Interactivity.CHANNEL_PROMPT
    assert cli_run.tools.names == channel.tools.names == EXPECTED_TOOLS[agent]
    assert [row["name"] for row in json.loads(listing)] == list(EXPECTED_TOOLS[agent])
    assert {row["source"] for row in json.loads(listing) if "__" in row["name"]} <= {"skill"}
    listed = json.loads(policy)
    assert listed["skills"] == cli_run.describe()["skills"] == (["notes", "docs"] if agent == "ops" else ["docs"])
    assert listed["prompt_sections"] == EXPECTED_SECTIONS[agent]
    assert comparable(listed) == comparable(cli_run.describe()) == comparable(channel.describe())
    # what the provider was actually sent, on both turn paths
    for request, execution in zip(fake_llm.requests, seen, strict=True):
        assert request["messages"][0] == {"role": "system", "content": execution.system_prompt}
        assert "## Skill: docs\nHouse style for answers." in execution.system_prompt
        assert request.get("tools", []) == list(execution.tools.provider_specs())


@pytest.mark.parametrize("agent", ["ops", "intern"])
def test_skill_scope_is_identical_on_every_path(agent: str, tmp_path: Path, write_config: WriteConfig) -> None:
    write_kit(tmp_path)
    config = load_config(write_config(skills_toml("http://127.0.0.1:9/v1")))
    services = Services()
    baseline = resolve(config, agent, path=ConstructionPath.CLI_RUN, services=services)
    assert baseline.tools.names == EXPECTED_TOOLS[agent]
    for path in ConstructionPath:
        execution = resolve(config, agent, path=path, services=services)
        assert execution.tools.names == baseline.tools.names, path
        assert execution.system_prompt == baseline.system_prompt, path
        assert comparable(execution.describe()) == declared(path, comparable(baseline.describe())), path
