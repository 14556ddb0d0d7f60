"""The seal at run time: what the source scanner cannot see, the sealed classes refuse themselves."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import types
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.errors import SealViolation
from orchestrator.seam import (
    ApprovalManager,
    ResolvedAgentExecution,
    ScopedToolRegistry,
    Services,
    build_cli_run,
)
from orchestrator.seam._seal import SEAL

SEALED_CLASSES = (ResolvedAgentExecution, ScopedToolRegistry, ApprovalManager)
# The one model server address nothing listens on: a forged execution that got past the
# engine's check would end in a provider error, not in SealViolation.
CONFIG = (
    '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n'
    'tools = ["file_read", "file_write", "shell", "http_fetch"]\n'
    '[agents.a.approval]\nalways_ask = ["shell"]\n[agents.a.http_fetch]\nallowed_hosts = ["example.com"]\n'
)
# The execution's live services: state by design (the action ledger, the usage meter, the client).
SERVICES = frozenset({"provider", "ledger", "usage"})
COPIES: dict[str, Callable[[object], object]] = {
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle round trip": lambda value: pickle.loads(pickle.dumps(value)),
    "copy.replace protocol": lambda value: type(value).__replace__(value),  # type: ignore[attr-defined]
}


@pytest.fixture
def execution(load: Callable[..., Config], services: Services) -> ResolvedAgentExecution:
    return build_cli_run(load(CONFIG), "a", services)


def _parts(execution: ResolvedAgentExecution) -> dict[str, object]:
    return {"execution": execution, "registry": execution.tools, "approvals": execution.approvals}


def _forged_like(genuine: ResolvedAgentExecution) -> ResolvedAgentExecution:
    """An execution made around the constructor: `object.__new__`, every slot filled from `genuine`."""
    forged: ResolvedAgentExecution = object.__new__(ResolvedAgentExecution)
    for field in dataclasses.fields(ResolvedAgentExecution):
        getattr(ResolvedAgentExecution, field.name).__set__(forged, getattr(genuine, field.name))
    return forged


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("part", ["execution", "registry", "approvals"])
def test_a_sealed_value_refuses_to_be_copied_or_pickled(execution: ResolvedAgentExecution, part: str, how: str) -> None:
    with pytest.raises(SealViolation, match="a copy or a pickle"):
        COPIES[how](_parts(execution)[part])


@pytest.mark.parametrize("cls", SEALED_CLASSES, ids=lambda c: c.__name__)
def test_a_sealed_class_refuses_new_without_the_token(cls: type) -> None:
    with pytest.raises(SealViolation) as caught:
        cls.__new__(cls)
    assert caught.value.kind == cls.__name__


@pytest.mark.parametrize("cls", SEALED_CLASSES, ids=lambda c: c.__name__)
def test_a_sealed_class_refuses_subclasses(cls: type) -> None:
    with pytest.raises(SealViolation, match="a subclass"):
        type("Mine", (cls,), {"__init__": lambda self, **kw: None})
    with pytest.raises(SealViolation, match="a subclass"):
        class Mine(cls):  # type: ignore[valid-type,misc]
            pass


async def test_the_engine_refuses_an_execution_made_around_the_constructor(
    execution: ResolvedAgentExecution,
) -> None:
    forged = _forged_like(execution)
    assert ResolvedAgentExecution.minted(execution) and not ResolvedAgentExecution.minted(forged)
    with pytest.raises(SealViolation):
        await run_tool_call_loop(forged, Transcript(session="s"), "hi")


async def test_the_engine_refuses_an_object_whose_class_was_swapped_in() -> None:
    impostor_class = type("Impostor", (), {"__slots__": tuple(ResolvedAgentExecution.__slots__)})
    impostor = impostor_class()
    # CPython refuses the swap for the weak-referenceable sealed layout; were it allowed,
    # the engine's check would still refuse the object, which no sealed constructor made.
    with pytest.raises((TypeError, SealViolation)):
        impostor.__class__ = ResolvedAgentExecution
        await run_tool_call_loop(impostor, Transcript(session="s"), "hi")


class _Forgery:
    """Pickles as `object.__new__(ResolvedAgentExecution)`, with or without slot state."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def __reduce__(self) -> tuple[Any, ...]:
        return (object.__new__, (ResolvedAgentExecution,), self.state)


async def test_a_forged_pickle_yields_nothing_the_engine_runs() -> None:
    state = (None, {"system_prompt": "obey", "skills": (), "mcp_bundles": ()})
    with pytest.raises(SealViolation, match="a copy or a pickle"):
        pickle.loads(pickle.dumps(_Forgery(state)))
    empty = pickle.loads(pickle.dumps(_Forgery(None)))
    with pytest.raises(SealViolation):
        await run_tool_call_loop(empty, Transcript(session="s"), "hi")


def test_even_the_token_cannot_wrap_a_forged_registry(execution: ResolvedAgentExecution) -> None:
    forged_registry = object.__new__(ScopedToolRegistry)
    fields = {f.name: getattr(execution, f.name) for f in dataclasses.fields(ResolvedAgentExecution)}
    with pytest.raises(SealViolation, match="unsealed parts"):
        ResolvedAgentExecution(**{**fields, "tools": forged_registry}, seal=SEAL)


def _mutable_parts(value: object, where: str, seen: set[int]) -> list[str]:
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, list | dict | set | bytearray):
        return [f"{where}: {type(value).__name__}"]
    found = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            found.append(f"{where}: {type(value).__name__} is not frozen")
        for f in dataclasses.fields(value):
            if not (where == "execution" and f.name in SERVICES):
                found += _mutable_parts(getattr(value, f.name), f"{where}.{f.name}", seen)
    elif isinstance(value, tuple | frozenset):
        for i, item in enumerate(value):
            found += _mutable_parts(item, f"{where}[{i}]", seen)
    elif isinstance(value, types.MappingProxyType):
        for key, item in value.items():
            found += _mutable_parts(item, f"{where}[{key!r}]", seen)
    return found


def test_every_part_of_an_execution_is_frozen(execution: ResolvedAgentExecution) -> None:
    """No list, dict or unfrozen dataclass to change in place: altering a part takes a bypass the scanner refuses."""
    tools = tuple(execution.tools.get(name) for name in execution.tools.names)
    rules = {n: getattr(execution.approvals, n) for n in ApprovalManager.__slots__ if n not in {"__weakref__", "audit"}}
    assert {"file_read", "shell", "http_fetch"} <= set(execution.tools.names) and rules["always_ask"] == ("shell",)
    assert _mutable_parts(execution, "execution", set()) == []
    assert _mutable_parts(tools, "execution.tools", set()) == []
    assert _mutable_parts(tuple(rules.values()), "execution.approvals", set()) == []
