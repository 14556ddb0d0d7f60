"""Every tool of ours with a contract, bound for a test, and JSON values drawn from a schema.

The strategies cover the JSON-schema subset our contracts produce (`SUPPORTED`); a schema
holding any other keyword fails `keywords_of` loudly, so a new tool's contract cannot use
a feature the property test does not generate. The oracle is the `jsonschema` library
(Draft 2020-12) with one change: an integer is a JSON integer literal (json.loads gives
`int`), so `5.0` is not one, as the contracts say.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import jsonschema
from hypothesis import strategies as st

from orchestrator.config import PeripheralConfig
from orchestrator.mcp.tool_search import ToolSearch
from orchestrator.memory import MemoryStore
from orchestrator.memory.tools import memory_tools
from orchestrator.peripherals import PeripheralPool, peripheral_tools
from orchestrator.policy import SecurityPolicy
from orchestrator.tools import BUILTIN_TOOLS, ChildOutcome, DelegateTool, SendFileTool, Tool

SUPPORTED: Final = frozenset({
    "type", "properties", "required", "additionalProperties", "description", "default", "items", "enum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "minimum", "maximum",
})
TARGETS: Final = ("helper", "careful")
# one of each tool of ours; a peripheral contributes one command (they share one contract)
OUR_TOOLS: Final = (
    *sorted(BUILTIN_TOOLS), "delegate", "send_file", "tool_search", "memory_store", "memory_recall",
    "memory_forget", "arm__status",
)

_INTEGER_IS_INT = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
)
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_INTEGER_IS_INT)


def schema_admits(schema: Mapping[str, Any], value: object) -> bool:
    """Return whether `value` is valid under `schema`, as a JSON-schema validator says."""
    return bool(_Validator(_thaw(schema)).is_valid(value))


def keywords_of(schema: Mapping[str, Any]) -> set[str]:
    """Return every keyword `schema` uses, nested ones included."""
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= keywords_of(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            found |= keywords_of(schema[key])
    return found


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


# --- strategies ---------------------------------------------------------------------------

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_KIND: Final = {
    "string": str, "integer": int, "array": list, "object": dict, "boolean": bool, "number": float,
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return next(name for name, kind in _KIND.items() if name != "boolean" and isinstance(value, kind))


def admitted(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Draw values `schema` admits."""
    if "enum" in schema:
        return st.sampled_from(tuple(schema["enum"]))
    kind = schema.get("type")
    if kind == "string":
        text = st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 40))
        pattern = schema.get("pattern")
        return text.filter(lambda s: re.search(pattern, s) is not None) if pattern else text
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
    if kind == "array":
        return st.lists(
            admitted(schema.get("items", {})), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 5)
        )
    if kind == "object" and "properties" in schema:
        return _objects(schema)
    if kind == "object":
        return st.dictionaries(st.text(max_size=6), json_values, max_size=3)
    return json_values


def _objects(schema: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema["properties"]
    required = set(schema.get("required", ()))
    return st.fixed_dictionaries(
        {name: admitted(sub) for name, sub in properties.items() if name in required},
        optional={name: admitted(sub) for name, sub in properties.items() if name not in required},
    )


def _breaks(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Draw values one property's `schema` refuses: the wrong JSON type or a broken bound."""
    kind = schema.get("type")
    ways: list[st.SearchStrategy[Any]] = [json_values.filter(lambda v: _json_type(v) != kind)]
    if "enum" in schema:
        ways.append(st.text(max_size=6).filter(lambda s: s not in schema["enum"]))
    if "minLength" in schema and schema["minLength"] > 0:
        ways.append(st.text(max_size=schema["minLength"] - 1))
    if "maxLength" in schema:
        ways.append(st.text(min_size=schema["maxLength"] + 1, max_size=schema["maxLength"] + 3))
    if "pattern" in schema:
        ways.append(st.text(max_size=6).filter(lambda s: re.search(schema["pattern"], s) is None))
    if "minimum" in schema:
        ways.append(st.integers(max_value=schema["minimum"] - 1))
    if "maximum" in schema:
        ways.append(st.integers(min_value=schema["maximum"] + 1))
    if kind == "array":
        items = schema.get("items", {})
        if schema.get("minItems", 0) > 0:
            ways.append(st.lists(admitted(items), max_size=schema["minItems"] - 1))
        if "maxItems" in schema:
            ways.append(st.lists(admitted(items), min_size=schema["maxItems"] + 1, max_size=schema["maxItems"] + 2))
        if items:
            ways.append(st.tuples(_breaks(items), st.lists(admitted(items), max_size=2)).map(lambda t: [t[0], *t[1]]))
    return st.one_of(ways)


def refused(schema: Mapping[str, Any]) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """Draw (the field at fault, arguments `schema` refuses): a missing, extra or broken field."""
    properties = schema["properties"]
    required = tuple(schema.get("required", ()))
    ways: list[st.SearchStrategy[tuple[str, dict[str, Any]]]] = []
    if required:
        ways.append(
            st.tuples(st.sampled_from(required), _objects(schema))
            .map(lambda t: (t[0], {k: v for k, v in t[1].items() if k != t[0]}))
        )
    if schema.get("additionalProperties") is False:
        extra = st.text(min_size=1, max_size=8).filter(lambda k: k not in properties)
        ways.append(st.tuples(extra, json_values, _objects(schema)).map(lambda t: (t[0], {**t[2], t[0]: t[1]})))
    for name, sub in properties.items():
        ways.append(
            st.tuples(st.just(name), _breaks(sub), _objects(schema)).map(lambda t: (t[0], {**t[2], t[0]: t[1]}))
        )
    return st.one_of(ways)


def anything(schema: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Draw any JSON object near `schema`: its fields (good or bad values), some absent, some extra."""
    properties = schema["properties"]
    value = {name: admitted(sub) | _breaks(sub) | json_values for name, sub in properties.items()}
    extra = st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=2)
    return st.tuples(st.fixed_dictionaries({}, optional=value), extra).map(lambda t: {**t[1], **t[0]})


# --- the tools, bound ---------------------------------------------------------------------


class _Finished:
    async def run(self, task: str) -> ChildOutcome:
        return ChildOutcome(completed=True, stop="stop", text=f"did {len(task)} characters of work")


class _Delegation:
    caller = "lead"
    targets = TARGETS

    def start(self, target: str) -> _Finished:
        return _Finished()


def policy(workspace: Path) -> SecurityPolicy:
    """Return a policy under which nothing leaves `workspace`: no command, no host."""
    return SecurityPolicy(
        agent="ops", autonomy="full", workspace=workspace, shell_allowed_commands=frozenset(),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1024,
    )


@asynccontextmanager
async def bound_tool(name: str, root: Path) -> AsyncIterator[Tool]:
    """Yield tool `name` bound beneath `root`: a workspace, a memory file, a device that is not there."""
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    if name in BUILTIN_TOOLS:
        yield BUILTIN_TOOLS[name].bind(policy(workspace))
    elif name == "delegate":
        yield DelegateTool(delegation=_Delegation())
    elif name == "send_file":
        yield SendFileTool(security=policy(workspace))  # no chat bound: refused after the contract
    elif name == "tool_search":
        yield ToolSearch(tool.spec for tool in BUILTIN_TOOLS.values())
    elif name.startswith("memory_"):
        with MemoryStore(root / "memory.sqlite3") as store:
            yield memory_tools(store, agent="ops", read_from=())[name]
    else:
        device, _, command = name.partition("__")
        settings = PeripheralConfig(port=str(root / "no-such-device"), commands=(command,), timeout_s=1.0)
        async with PeripheralPool() as pool:
            yield peripheral_tools(device, settings, pool=pool)[name]
