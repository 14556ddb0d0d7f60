"""Per-agent MCP scope on one shared server: gating, exact-name refusal, read-only, deferred search."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.mcp import DEFERRED_SECTION
from orchestrator.policy import ApprovalRule
from orchestrator.seam import ConstructionPath, ScopedAssembly, mcp_servers_for, resolve
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.mcp.kit import (
    agent_toml,
    bundle,
    execution,
    mcp_services,
    sent_tools,
    server_counts,
    stdio_kit,
    tool_results,
    turn,
)

pytestmark = pytest.mark.slow


def kit_config(fake: FakeOpenAI, load: Callable[..., Config]) -> Config:
    return load(
        provider_toml(fake.base_url)
        + stdio_kit()
        + bundle("notes", servers={"kit": ["echo", "write_*"]})
        + bundle("ops", servers={"kit": ["secret_op", "pid"]})
        + bundle("everything", servers={"kit": ["*"]})
        + bundle("lazy", servers={"kit": ["echo", "write_note", "wipe_notes"]}, mode="deferred")
        + bundle("silent", servers={"kit": []})
        + agent_toml("alpha", bundles=["notes"])
        + agent_toml("beta", bundles=["ops"])
        + agent_toml("reader", bundles=["everything"], autonomy="read_only")
        + agent_toml("gamma", bundles=["lazy"])
        + agent_toml("delta", bundles=["lazy"], extra='excluded_tools = ["tool_search"]\n')
        + agent_toml("epsilon", bundles=["lazy", "notes"], extra='excluded_tools = ["kit__wipe_*"]\n')
        + agent_toml("mute", bundles=["silent"])
        + agent_toml("acp_on", bundles=["notes"], extra="acp_enable_mcp = true\n")
    )


async def test_two_agents_on_one_server_see_and_run_only_their_own_tools(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = kit_config(fake_llm, load)
    async with mcp_services(config, "alpha", "beta") as services:
        alpha, beta = execution(config, services, "alpha"), execution(config, services, "beta")
        assert alpha.tools.names == ("kit__echo", "kit__write_note")  # "write_*" did not grant wipe_notes
        assert beta.tools.names == ("kit__pid", "kit__secret_op")
        echo = alpha.tools.get("kit__echo")
        assert echo is not None and echo.spec.read_only and echo.spec.untrusted_output
        assert echo.spec.parameters["required"] == ("text",)

        # alpha's model names beta's tool exactly: refused by the registry, never sent to the server.
        fake_llm.script(
            tool_calls(("kit__secret_op", {"target": "prod"}), ("kit__echo", {"text": "hello"})),
            text("alpha done"),
            tool_call("kit__secret_op", {"target": "staging"}),
            text("beta done"),
        )
        first = await turn(config, services, "alpha")
        second = await turn(config, services, "beta")

        assert first.executed == ("kit__echo",)
        refused, echoed = tool_results(fake_llm.requests[1])
        assert refused == "Error: tool 'kit__secret_op' is not available to this agent. It was not run."
        assert echoed.startswith('<untrusted-data source="kit__echo">\nhello\n</untrusted-data>')
        assert second.executed == ("kit__secret_op",)
        assert sent_tools(fake_llm.requests[0]) == ["kit__echo", "kit__write_note"]
        assert sent_tools(fake_llm.requests[2]) == ["kit__pid", "kit__secret_op"]
        # The server's own counter: the privileged tool ran once, for beta only.
        assert await server_counts(services) == {"echo": 1, "secret_op": 1}


async def test_read_only_autonomy_keeps_only_tools_hinted_read_only(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = kit_config(fake_llm, load)
    async with mcp_services(config, "reader") as services:
        reader = execution(config, services, "reader")
        # readOnlyHint=true only; tools without the annotation count as writing.
        assert reader.tools.names == (
            "kit__counts", "kit__echo", "kit__env_value", "kit__header_value", "kit__pid",
        )
        for name in reader.tools.names:
            tool = reader.tools.get(name)
            assert tool is not None and reader.approvals.rule_for(tool.spec) is ApprovalRule.ALLOW
        fake_llm.script(tool_calls(("kit__write_note", {"text": "x"}), ("kit__pid", {})), text("ok"))
        result = await turn(config, services, "reader")
        assert result.executed == ("kit__pid",)
        assert "not available to this agent" in tool_results(fake_llm.requests[1])[0]
        counts = await server_counts(services)
        assert counts.get("write_note", 0) == 0 and counts["pid"] == 1


async def test_connect_mcp_false_and_empty_bundles_grant_nothing(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = kit_config(fake_llm, load)
    assert mcp_servers_for(config, "alpha", path=ConstructionPath.ACP) == ()
    assert mcp_servers_for(config, "acp_on", path=ConstructionPath.ACP) == ("kit",)
    async with mcp_services(config, "alpha", "mute") as services:
        acp = execution(config, services, "alpha", ConstructionPath.ACP)
        assert (acp.tools.names, acp.mcp_bundles, acp.turn_context) == ((), (), ())
        knobbed = resolve(
            config, "alpha", path=ConstructionPath.CLI_RUN, services=services,
            assembly=ScopedAssembly(connect_mcp=False),
        )
        assert knobbed.tools.names == ()
        assert execution(config, services, "mute").tools.names == ()  # a bundle listing no tools
        assert execution(config, services, "acp_on", ConstructionPath.ACP).tools.names == (
            "kit__echo", "kit__write_note",
        )
        fake_llm.script(tool_call("kit__echo", {"text": "sneaky"}), text("ok"))
        result = await run_tool_call_loop(acp, Transcript(session="acp"), "go")
        assert result.executed == ()
        assert sent_tools(fake_llm.requests[0]) == []
        assert (await server_counts(services)).get("echo", 0) == 0


async def test_deferred_search_finds_and_runs_only_the_agents_own_tools(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = kit_config(fake_llm, load)
    async with mcp_services(config, "gamma", "beta") as services:
        gamma = execution(config, services, "gamma")
        assert gamma.tools.names == ("kit__echo", "kit__wipe_notes", "kit__write_note", "tool_search")
        assert gamma.tools.deferred == {"kit__echo", "kit__wipe_notes", "kit__write_note"}
        assert [s["function"]["name"] for s in gamma.tools.provider_specs()] == ["tool_search"]
        (section,) = gamma.prompt_sections
        assert section.name == DEFERRED_SECTION
        assert "- kit__echo: Echo the text back." in section.text and "secret_op" not in section.text
        assert section.text in gamma.system_prompt

        fake_llm.script(
            tool_call("tool_search", {"query": "privileged operation secret_op"}),
            tool_call("tool_search", {"query": "kit__secret_op"}),
            tool_call("tool_search", {"query": "echo text"}),
            tool_calls(("kit__echo", {"text": "found it"}), ("kit__secret_op", {"target": "prod"})),
            text("done"),
        )
        result = await turn(config, services, "gamma")
        assert result.executed == ("tool_search", "tool_search", "tool_search", "kit__echo")
        assert sent_tools(fake_llm.requests[0]) == ["tool_search"]  # activation never widens the specs
        searches = [_search_result(r) for r in tool_results(fake_llm.requests[3])]
        assert [m["name"] for m in searches[0]["matches"]] == []
        assert [m["name"] for m in searches[1]["matches"]] == []
        assert searches[2]["matches"][0]["name"] == "kit__echo"
        assert searches[2]["matches"][0]["parameters"]["required"] == ["text"]
        echoed, refused = tool_results(fake_llm.requests[4])[3:]
        assert "found it" in echoed
        assert refused == "Error: tool 'kit__secret_op' is not available to this agent. It was not run."
        counts = await server_counts(services)
        assert counts["echo"] == 1 and counts.get("secret_op", 0) == 0


async def test_deferred_tools_follow_exclusions_and_knobs(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    config = kit_config(fake_llm, load)
    async with mcp_services(config, "delta", "epsilon") as services:
        # tool_search excluded: the deferred tools and their prompt section go with it.
        delta = execution(config, services, "delta")
        assert (delta.tools.names, delta.prompt_sections) == ((), ())
        # eager (notes) wins over deferred (lazy); exclusions subtract from both.
        epsilon = execution(config, services, "epsilon")
        assert epsilon.tools.names == ("kit__echo", "kit__write_note")
        assert epsilon.tools.deferred == frozenset() and epsilon.prompt_sections == ()
        # caller_allowed narrows what tool_search can surface.
        narrowed = resolve(
            config, "gamma", path=ConstructionPath.CLI_RUN, services=services,
            assembly=ScopedAssembly(caller_allowed=frozenset({"tool_search", "kit__echo"})),
        )
        assert narrowed.tools.deferred == {"kit__echo"}
        search = narrowed.tools.get("tool_search")
        assert search is not None
        found = json.loads(await search.invoke({"query": "notes"}))
        assert found["matches"] == []
        assert "kit__write_note" not in narrowed.system_prompt


def _search_result(content: str) -> dict[str, object]:
    body = content.split("\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0]
    result: dict[str, object] = json.loads(body)
    return result
