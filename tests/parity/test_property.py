"""Property tests: knobs only narrow, and nothing outside the registry ever runs."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config import Config, parse_config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.providers import Completion, ModelBinding, Provider, ProviderPool, ToolCall
from orchestrator.seam import ConstructionPath, ScopedAssembly, Services, resolve
from orchestrator.tools import BUILTIN_NAMES

NAMES = sorted(BUILTIN_NAMES)
PATTERNS = [*NAMES, "*", "file_*", "*_dir", "sh?ll"]
STATE = tempfile.mkdtemp(prefix="orchestrator-prop-")
atexit.register(shutil.rmtree, STATE, True)

patterns = st.lists(st.sampled_from(PATTERNS), unique=True, max_size=4)
knob_sets = st.builds(
    ScopedAssembly,
    caller_allowed=st.none() | st.frozensets(st.sampled_from(PATTERNS), max_size=3),
    connect_mcp=st.booleans(),
    connect_peripherals=st.booleans(),
    exclude_memory=st.booleans(),
)


def make_config(tools: list[str], excluded: list[str], autonomy: str) -> Config:
    return parse_config(
        {
            "daemon": {"state_dir": STATE},
            "providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}},
            "agents": {
                "a": {
                    "provider": "p",
                    "model": "m",
                    "autonomy": autonomy,
                    "tools": tools,
                    "excluded_tools": [e for e in excluded if e != "*"],
                }
            },
        }
    )


def matches(name: str, pats: Sequence[str]) -> bool:
    return any(fnmatchcase(name, p) for p in pats)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=patterns,
    excluded=patterns,
    autonomy=st.sampled_from(["read_only", "supervised", "full"]),
    knobs=knob_sets,
    path=st.sampled_from(list(ConstructionPath)),
)
def test_knobs_never_widen_the_grant(
    tools: list[str], excluded: list[str], autonomy: str, knobs: ScopedAssembly, path: ConstructionPath
) -> None:
    config = make_config(tools, excluded, autonomy)
    services = Services()
    policy_only = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    narrowed = resolve(config, "a", path=path, services=services, assembly=knobs)
    granted = set(policy_only.tools.names)
    assert set(narrowed.tools.names) <= granted
    for name in granted:
        spec = policy_only.tools.get(name)
        assert spec is not None
        assert matches(name, tools) and not matches(name, [e for e in excluded if e != "*"])
        if autonomy == "read_only":
            assert spec.spec.read_only
    if knobs.caller_allowed is not None:
        assert all(matches(n, sorted(knobs.caller_allowed)) for n in narrowed.tools.names)


class _Scripted:
    """An in-process provider that calls the given tool names, then answers."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.sent_tools: list[list[str]] = []

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        temperature: float | None,
    ) -> Completion:
        self.sent_tools.append([t["function"]["name"] for t in tools])
        if messages[-1]["role"] == "user":
            return Completion(
                text=None,
                tool_calls=tuple(ToolCall(id=f"c{i}", name=n, arguments="{}") for i, n in enumerate(self.calls)),
            )
        return Completion(text="done")

    async def aclose(self) -> None:
        return None


@settings(max_examples=100, deadline=None)
@given(
    tools=patterns,
    autonomy=st.sampled_from(["read_only", "supervised", "full"]),
    calls=st.lists(st.sampled_from([*NAMES, "memory_store", "x__y", "tool_search"]) | st.text(max_size=8), max_size=5),
    knobs=knob_sets,
)
def test_no_tool_outside_the_registry_ever_runs(
    tools: list[str], autonomy: str, calls: list[str], knobs: ScopedAssembly
) -> None:
    config = make_config(tools, [], autonomy)
    scripted = _Scripted(calls)

    def factory(binding: ModelBinding) -> Provider:
        return scripted

    services = Services(providers=ProviderPool(factory=factory))
    execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services, assembly=knobs)
    result = asyncio.run(run_tool_call_loop(execution, Transcript(session="p"), "go"))
    assert set(result.executed) <= set(execution.tools.names)
    assert scripted.sent_tools[0] == list(execution.tools.names)
