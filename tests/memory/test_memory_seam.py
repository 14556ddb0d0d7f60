"""The memory surface at the seam: scope, filters and knobs decide the tools; the engine runs them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.memory import MemoryStore
from orchestrator.seam import ConstructionPath, ScopedAssembly, Services, resolve, uses_memory
from orchestrator.tools import ToolSource
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

MEMORY = ("memory_forget", "memory_recall", "memory_store")


def agents_toml(fake: FakeOpenAI) -> str:
    return provider_toml(fake.base_url) + """
[agents.full]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["list_dir"]
memory = { scope = "agent", read_from = ["other"] }

[agents.other]
provider = "fake"
model = "m"
autonomy = "full"
memory = { scope = "agent" }

[agents.reader]
provider = "fake"
model = "m"
autonomy = "read_only"
memory = { scope = "agent" }

[agents.trimmed]
provider = "fake"
model = "m"
excluded_tools = ["memory_f*"]
memory = { scope = "agent" }

[agents.none]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["*"]

[agents.none.http_fetch]
allowed_hosts = ["docs.example.com"]
"""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    with MemoryStore(tmp_path / "state" / "memory.sqlite3") as opened:
        yield opened


@pytest.fixture
async def services(store: MemoryStore) -> AsyncIterator[Services]:
    """Services with the memory store open; provider clients closed after the test."""
    svc = Services(memory=store)
    yield svc
    await svc.providers.aclose()


def memory_names(config: Config, agent: str, services: Services, **kwargs: object) -> list[str]:
    execution = resolve(config, agent, services=services, **kwargs)  # type: ignore[arg-type]
    return [n for n in execution.tools.names if n.startswith("memory_")]


async def test_scope_and_every_filter_decide_the_memory_tools(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services
) -> None:
    config = load(agents_toml(fake_llm))
    cli = ConstructionPath.CLI_RUN
    assert memory_names(config, "full", services, path=cli) == list(MEMORY)
    assert memory_names(config, "reader", services, path=cli) == ["memory_recall"]  # the read-only one
    assert memory_names(config, "trimmed", services, path=cli) == ["memory_recall", "memory_store"]
    assert memory_names(config, "none", services, path=cli) == []  # "*" grants built-ins, not memory
    narrowed = ScopedAssembly(caller_allowed=frozenset({"memory_recall", "list_dir"}))
    assert memory_names(config, "full", services, path=cli, assembly=narrowed) == ["memory_recall"]
    # the ACP path strips them (exclude_memory), and so does the knob on any path
    assert memory_names(config, "full", services, path=ConstructionPath.ACP) == []
    stripped = ScopedAssembly(exclude_memory=True)
    assert memory_names(config, "full", services, path=cli, assembly=stripped) == []
    # no store open = no memory tools (fail closed), though the scope is still reported
    no_store = Services()
    bare = resolve(config, "full", path=cli, services=no_store)
    await no_store.providers.aclose()
    assert [n for n in bare.tools.names if n.startswith("memory_")] == []
    assert bare.describe()["memory"] == {"mode": "agent", "read_from": ["other"]}
    execution = resolve(config, "full", path=cli, services=services)
    specs = {n: execution.tools.get(n) for n in MEMORY}
    assert {n: (t.spec.read_only, t.spec.source) for n, t in specs.items() if t is not None} == {
        "memory_forget": (False, ToolSource.MEMORY),
        "memory_recall": (True, ToolSource.MEMORY),
        "memory_store": (False, ToolSource.MEMORY),
    }
    assert [uses_memory(config, a) for a in ("full", "reader", "none", "zed")] == [True, True, False, False]
    assert uses_memory(config, "full", path=ConstructionPath.ACP) is False


async def test_a_turn_stores_and_recalls_only_within_scope(
    fake_llm: FakeOpenAI, load: Callable[..., Config], store: MemoryStore, services: Services
) -> None:
    config = load(agents_toml(fake_llm))

    async def turn(agent: str, message: str) -> tuple[tuple[str, ...], list[str]]:
        execution = resolve(config, agent, path=ConstructionPath.CLI_RUN, services=services)
        before = len(fake_llm.requests)
        result = await run_tool_call_loop(execution, Transcript(session=agent), message)
        last = fake_llm.requests[-1]
        assert len(fake_llm.requests) == before + 2
        return result.executed, [m["content"] for m in last["messages"] if m["role"] == "tool"]

    fake_llm.script(tool_call("memory_store", {"text": "Standup moved to 9:30.", "tags": ["standup"]}), text("ok"))
    assert await turn("other", "remember") == (("memory_store",), ["Stored memory #1."])
    fake_llm.script(tool_call("memory_store", {"text": "Full's standup notes live in the wiki."}), text("ok"))
    assert await turn("full", "remember") == (("memory_store",), ["Stored memory #2."])
    # full reads its own and other's (read_from); the result is wrapped as untrusted data
    fake_llm.script(tool_call("memory_recall", {"query": "standup"}), text("ok"))
    executed, (recalled,) = await turn("full", "recall")
    assert executed == ("memory_recall",)
    assert recalled.startswith('<untrusted-data source="memory_recall">\n2 memories match "standup"')
    assert "(by other) [standup]: Standup moved to 9:30." in recalled and "(by full)" in recalled
    # other may not read full's memories, nor forget them
    fake_llm.script(tool_call("memory_recall", {"query": "standup wiki"}), text("ok"))
    _, (only_own,) = await turn("other", "recall")
    assert "(by other)" in only_own and "(by full)" not in only_own and "live in the wiki" not in only_own
    fake_llm.script(tool_call("memory_forget", {"id": 2}), text("ok"))
    assert await turn("other", "forget") == (
        ("memory_forget",),
        ["Error: you have no memory #2 (only your own memories can be forgotten)"],
    )
    # an agent without memory calling the tool by name is refused by the engine, never run
    fake_llm.script(tool_call("memory_recall", {"query": "standup"}), text("ok"))
    assert await turn("none", "recall") == (
        (), ["Error: tool 'memory_recall' is not available to this agent. It was not run."]
    )
    assert {r.id for r in await store.recall("standup", agents=("full", "other"), limit=5)} == {1, 2}


def test_the_seam_strips_exactly_the_memory_tools_and_config_rejects_granting_them(
    fake_llm: FakeOpenAI, load: Callable[..., Config]
) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.memory import MEMORY_FORGET_SPEC, MEMORY_RECALL_SPEC, MEMORY_STORE_SPEC
    from orchestrator.tools import MEMORY_TOOL_NAMES

    # the seam strips the catalog's names; the memory package builds its specs under them
    built = {spec.name for spec in (MEMORY_STORE_SPEC, MEMORY_RECALL_SPEC, MEMORY_FORGET_SPEC)}
    assert built == MEMORY_TOOL_NAMES == frozenset(MEMORY)
    body = provider_toml(fake_llm.base_url) + '[agents.a]\nprovider = "fake"\nmodel = "m"\ntools = ["memory_store"]\n'
    with pytest.raises(ConfigError) as error:
        load(body)
    assert str(error.value).endswith(
        "agents.a.tools[0]: 'memory_store' is a memory tool; memory tools are granted by "
        '[memory] scope = "agent", not tools'
    )
