"""Property tests: knobs only narrow, and nothing outside the registry ever runs."""

from __future__ import annotations

import asyncio
import atexit
import functools
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.checks import parse_config
from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.memory import MemoryStore
from orchestrator.providers import Completion, ModelBinding, Provider, ProviderPool, ToolCall
from orchestrator.peripherals import PeripheralPool
from orchestrator.seam import PATH_PROFILES, ConstructionPath, ScopedAssembly, Services, resolve
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
                    "http_fetch": {"allowed_hosts": ["docs.example.com"]},
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
        on_text: Callable[[str], Awaitable[None]] | None = None,  # never streams
        max_tokens: int | None = None,  # answers are short
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


# Peripherals: two devices whose ports do not exist; a tool reaching the pool leaves a port
# object behind (its open then fails), so "never touched" is observable.
DEVICES = {
    "dev": {"port": f"{STATE}/no-such-dev", "commands": ["read", "write"], "read_only_commands": ["read"]},
    "aux": {"port": f"{STATE}/no-such-aux", "commands": ["ping"]},
}
PERIPHERAL_NAMES = ["dev__read", "dev__write", "aux__ping"]
PERIPHERAL_PATTERNS = [*PERIPHERAL_NAMES, "dev__*", "*__*", "*", "list_dir"]


def make_peripheral_config(devices: list[str], excluded: list[str], autonomy: str) -> Config:
    return parse_config(
        {
            "daemon": {"state_dir": STATE},
            "providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}},
            "peripherals": DEVICES,
            "agents": {
                "a": {
                    "provider": "p", "model": "m", "autonomy": autonomy, "tools": ["list_dir"],
                    "peripherals": devices, "excluded_tools": [e for e in excluded if e != "*"],
                }
            },
        }
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    devices=st.lists(st.sampled_from(sorted(DEVICES)), unique=True),
    excluded=st.lists(st.sampled_from(PERIPHERAL_PATTERNS), unique=True, max_size=3),
    autonomy=st.sampled_from(["read_only", "supervised", "full"]),
    allowed=st.none() | st.frozensets(st.sampled_from(PERIPHERAL_PATTERNS), max_size=3),
    connect=st.booleans(),
    path=st.sampled_from(list(ConstructionPath)),
)
def test_knobs_never_widen_peripheral_tools(
    devices: list[str], excluded: list[str], autonomy: str, allowed: frozenset[str] | None,
    connect: bool, path: ConstructionPath,
) -> None:
    config = make_peripheral_config(devices, excluded, autonomy)
    pool = PeripheralPool()
    services = Services(peripherals=pool)
    knobs = ScopedAssembly(caller_allowed=allowed, connect_peripherals=connect)
    policy_only = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    narrowed = resolve(config, "a", path=path, services=services, assembly=knobs)
    assert set(narrowed.tools.names) <= set(policy_only.tools.names)
    for name in policy_only.tools.names:
        if name == "list_dir":
            continue
        device, command = name.split("__")
        assert device in devices and command in DEVICES[device]["commands"]  # type: ignore[operator]
        assert not matches(name, [e for e in excluded if e != "*"])
        if autonomy == "read_only":
            assert command in DEVICES[device].get("read_only_commands", [])  # type: ignore[operator]
    if not (connect and PATH_PROFILES[path].knobs.connect_peripherals):
        assert not any("__" in n for n in narrowed.tools.names)
    if allowed is not None:
        assert all(matches(n, sorted(allowed)) for n in narrowed.tools.names)
    assert all(pool.port(d) is None for d in DEVICES)  # resolving never touches a device


@settings(max_examples=100, deadline=None)
@given(
    devices=st.lists(st.sampled_from(sorted(DEVICES)), unique=True),
    autonomy=st.sampled_from(["read_only", "supervised", "full"]),
    calls=st.lists(st.sampled_from([*PERIPHERAL_NAMES, "dev__nope", "list_dir"]), max_size=4),
    knobs=knob_sets,
)
def test_no_peripheral_call_outside_the_registry_reaches_a_device(
    devices: list[str], autonomy: str, calls: list[str], knobs: ScopedAssembly
) -> None:
    config = make_peripheral_config(devices, [], autonomy)
    scripted = _Scripted(calls)

    def factory(binding: ModelBinding) -> Provider:
        return scripted

    async def turn() -> tuple[set[str], set[str], set[str]]:
        async with PeripheralPool() as pool:
            services = Services(providers=ProviderPool(factory=factory), peripherals=pool)
            execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services, assembly=knobs)
            result = await run_tool_call_loop(execution, Transcript(session="p"), "go")
            touched = {d for d in DEVICES if pool.port(d) is not None}
            return set(result.executed), set(execution.tools.names), touched

    executed, registry, touched = asyncio.run(turn())
    assert executed <= registry
    assert touched == {n.split("__")[0] for n in executed if "__" in n}


# Memory: scope "agent" grants the memory tools (bound to the agent and its read_from);
# every filter and knob only removes them, and no open store grants none.
MEMORY_NAMES = ["memory_forget", "memory_recall", "memory_store"]
MEMORY_PATTERNS = [*MEMORY_NAMES, "memory_*", "*_recall", "list_dir"]
MEMORY_STORE = MemoryStore(Path(STATE) / "memory.sqlite3")
atexit.register(MEMORY_STORE.close)


@functools.cache
def seeded_memories() -> None:
    for writer in ("a", "b", "c"):
        asyncio.run(MEMORY_STORE.store(agent=writer, text=f"propmarker written by {writer}"))


def make_memory_config(scope: str, read_from: list[str], excluded: list[str], autonomy: str) -> Config:
    return parse_config(
        {
            "daemon": {"state_dir": STATE},
            "providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}},
            "agents": {
                "a": {
                    "provider": "p", "model": "m", "autonomy": autonomy, "tools": ["list_dir"],
                    "memory": {"scope": scope, "read_from": read_from}, "excluded_tools": excluded,
                },
                "b": {"provider": "p", "model": "m"},
            },
        }
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scope=st.sampled_from(["agent", "none"]),
    read_from=st.sampled_from([[], ["b"]]),
    excluded=st.lists(st.sampled_from(MEMORY_PATTERNS), unique=True, max_size=3),
    autonomy=st.sampled_from(["read_only", "supervised", "full"]),
    allowed=st.none() | st.frozensets(st.sampled_from(MEMORY_PATTERNS), max_size=3),
    exclude_memory=st.booleans(),
    with_store=st.booleans(),
    path=st.sampled_from(list(ConstructionPath)),
)
def test_knobs_never_widen_memory_tools(
    scope: str, read_from: list[str], excluded: list[str], autonomy: str, allowed: frozenset[str] | None,
    exclude_memory: bool, with_store: bool, path: ConstructionPath,
) -> None:
    seeded_memories()
    config = make_memory_config(scope, read_from, excluded, autonomy)
    services = Services(memory=MEMORY_STORE if with_store else None)
    knobs = ScopedAssembly(caller_allowed=allowed, exclude_memory=exclude_memory)
    policy_only = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    narrowed = resolve(config, "a", path=path, services=services, assembly=knobs)
    granted = [n for n in policy_only.tools.names if n.startswith("memory_")]
    expected = [
        n for n in MEMORY_NAMES
        if scope == "agent" and with_store and not matches(n, excluded)
        and (autonomy != "read_only" or n == "memory_recall")
    ]
    assert granted == expected
    assert set(narrowed.tools.names) <= set(policy_only.tools.names)
    if exclude_memory or PATH_PROFILES[path].knobs.exclude_memory:
        assert not any(n.startswith("memory_") for n in narrowed.tools.names)
        assert narrowed.memory.mode == "none"
    if allowed is not None:
        assert all(matches(n, sorted(allowed)) for n in narrowed.tools.names)
    recall = narrowed.tools.get("memory_recall")
    if recall is not None:  # reads exactly itself plus read_from, never anyone else
        listing = asyncio.run(recall.invoke({"query": "propmarker", "limit": 50}))
        assert {line.rsplit(" ", 1)[-1] for line in listing.splitlines()[1:]} == {"a", *read_from}

