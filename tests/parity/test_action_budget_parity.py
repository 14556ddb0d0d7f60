"""`max_actions_per_hour` is kept per (agent, sender): one person cannot spend another's budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from channels import Inbound
from orchestrator.config import Config
from orchestrator.daemon import Disposition, process_message
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.seam import ConstructionPath, Services, resolve
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls

SPENT = "Error: the action budget of 2 tool calls per hour is spent. 'list_dir' was not run."
LISTED = "(empty directory)"


def budget_toml(fake: FakeOpenAI) -> str:
    return provider_toml(fake.base_url) + (
        '[agents.a]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["list_dir"]\n'
        "[agents.a.budget]\nmax_actions_per_hour = 2\n"
        '[agents.b]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["list_dir"]\n'
        "[agents.b.budget]\nmax_actions_per_hour = 2\n"
    )


def three_calls() -> Any:
    return tool_calls(("list_dir", {}), ("list_dir", {"path": "."}), ("list_dir", {"path": "./"}))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_engine_keys_the_budget_on_agent_and_actor(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(budget_toml(fake_llm))

    async def turn(agent: str, actor: str | None) -> int:
        fake_llm.script(three_calls(), text("ok"))
        execution = resolve(config, agent, path=ConstructionPath.LIBRARY, services=services)
        result = await run_tool_call_loop(execution, Transcript(session="s"), "go", actor=actor)
        assert tool_results(fake_llm.requests[-1]).count(SPENT) == 3 - len(result.executed)
        return len(result.executed)

    assert await turn("a", "tg:alice") == 2
    assert await turn("a", "tg:alice") == 0  # alice's hour is spent ...
    assert await turn("a", "tg:bob") == 2  # ... bob's is his own
    assert await turn("b", "tg:alice") == 2  # and so is each agent's
    assert await turn("a", None) == 2  # no known person: one shared anonymous budget
    assert await turn("a", None) == 0


async def test_channel_senders_each_get_their_own_budget(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path: Path = write_config(
        budget_toml(fake_llm)
        + '\n[channels.term]\nkind = "terminal"\nuser = "alice"\n'
        + '[[routes]]\nchannel = "term"\nagent = "a"\nsenders = ["alice", "bob"]\n'
    )
    async with running(path) as (runtime, _):
        results: dict[str, list[str]] = {}
        for n, sender in enumerate(("alice", "alice", "bob")):
            fake_llm.script(three_calls(), text(f"done {n}"))
            inbound = Inbound(is_direct=True, channel="term", chat="terminal", sender=sender, text="list", event_id=f"e{n}")
            assert await process_message(runtime, inbound) is Disposition.ANSWERED
            results[f"{sender}{n}"] = tool_results(fake_llm.requests[-1])[-3:]
    assert results == {
        "alice0": [LISTED, LISTED, SPENT],
        "alice1": [SPENT, SPENT, SPENT],
        "bob2": [LISTED, LISTED, SPENT],
    }
