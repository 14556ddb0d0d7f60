"""Every tool of ours declares its arguments exactly once: its contract.

The schema the model sees is the contract's (the same object), no module that defines a
tool of ours writes a schema by hand, and a refusal is one line naming the field.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any, Final

import pytest

from orchestrator.tools import (
    BUILTIN_TOOLS,
    RESERVED_TOOL_NAMES,
    InvalidArguments,
    ToolArguments,
    ToolSpec,
)
from orchestrator.tools.delegate import delegate_arguments
from tests.tools.contract_kit import OUR_TOOLS, TARGETS, bound_tool

ROOT: Final = Path(__file__).resolve().parents[2]
# every module that defines a tool of ours (MCP tools keep their server's schema; skill
# tools their manifest's, which `skills/arguments.py` turns into both halves)
TOOL_MODULES: Final = (
    # base.py holds the Tool protocol and the empty schema a foreign tool without parameters gets
    *sorted(p for p in (ROOT / "orchestrator" / "tools").glob("*.py") if p.name != "base.py"),
    ROOT / "orchestrator" / "memory" / "tools.py",
    ROOT / "orchestrator" / "mcp" / "tool_search.py",
    ROOT / "orchestrator" / "peripherals" / "tools.py",
)
_SCHEMA_KEYS: Final = frozenset({"properties", "additionalProperties", "required"})


def hand_written_schemas(source: str) -> list[int]:
    """Return the lines of dict literals in `source` that spell a JSON schema's keys."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Dict)
        and any(isinstance(k, ast.Constant) and k.value in _SCHEMA_KEYS for k in node.keys)
    ]


def _spec(name: str, tmp_path: Path) -> ToolSpec:
    async def spec() -> ToolSpec:
        async with bound_tool(name, tmp_path) as tool:
            return tool.spec

    return asyncio.run(spec())


def test_the_list_of_our_tools_holds_every_builtin_and_reserved_tool() -> None:
    # a new built-in or seam tool joins OUR_TOOLS, and with it the property test
    assert set(BUILTIN_TOOLS) | RESERVED_TOOL_NAMES <= set(OUR_TOOLS)


@pytest.mark.parametrize("name", OUR_TOOLS)
def test_the_schema_the_model_sees_is_the_contracts(name: str, tmp_path: Path) -> None:
    spec = _spec(name, tmp_path)
    assert spec.contract is not None and issubclass(spec.contract, ToolArguments)
    assert spec.parameters is spec.contract.parameters()
    sent = spec.openai_spec()["function"]["parameters"]
    assert sent["type"] == "object" and sent["additionalProperties"] is False
    assert set(sent["required"]) <= set(sent["properties"])
    assert all(sub.get("description") for sub in sent["properties"].values())
    assert "title" not in repr(sent)  # pydantic's titles are tidied away


def test_every_builtin_tool_has_a_contract_of_its_own() -> None:
    contracts = [tool.spec.contract for tool in BUILTIN_TOOLS.values()]
    assert None not in contracts and len(set(contracts)) == len(contracts)


@pytest.mark.parametrize("module", TOOL_MODULES, ids=lambda p: p.name)
def test_no_tool_module_writes_a_schema_by_hand(module: Path) -> None:
    assert hand_written_schemas(module.read_text("utf-8")) == []


def test_the_schema_scan_finds_a_hand_written_schema() -> None:
    planted = 'SPEC = ToolSpec(name="x", parameters={"type": "object", "properties": {"a": {"type": "string"}}})\n'
    assert hand_written_schemas(planted) == [1]


def test_a_spec_takes_a_contract_or_parameters_never_both() -> None:
    contract = BUILTIN_TOOLS["file_read"].spec.contract
    with pytest.raises(ValueError, match="'x': give its contract or its parameters, not both"):
        ToolSpec(name="x", description="x", contract=contract, parameters={"type": "object", "properties": {}})


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("shell", {"argv": []}, "argument 'argv' must name a command"),
        ("shell", {"argv": ["ls", "a\x00b"]}, "argv[1] must not contain a NUL character"),
        ("shell", {"argv": ["ls"], "cwd": "/", "env": {}}, "unexpected argument(s): cwd, env"),
        ("list_dir", {"path": None}, "argument 'path' must be a string, not null"),
        ("file_write", {"path": "a", "content": 1.5}, "argument 'content' must be a string, not a number"),
        ("http_fetch", {"url": ["x"]}, "argument 'url' must be a string, not an array"),
        ("send_file", {"path": ""}, "argument 'path' must not be empty"),
        ("send_file", {"path": "a", "caption": None}, "argument 'caption' must be a string, not null"),
        ("delegate", {"agent": "helper", "task": " \n"}, "argument 'task' must not be blank"),
        ("tool_search", {"query": "x", "limit": 21}, "argument 'limit' must be an integer from 1 to 20, not 21"),
        ("tool_search", {"query": "x", "limit": "5"}, "argument 'limit' must be an integer, not a string"),
        ("memory_forget", {"id": 0}, f"argument 'id' must be an integer from 1 to {2**63 - 1}, not 0"),
        ("arm__status", {"to": 3}, 'unknown parameter(s) to; pass {"args": {...}}'),
        ("file_read", {"path": "a", "bad\nname": 1}, "unexpected argument(s): 'bad\\nname'"),
    ],
)
def test_a_refusal_is_one_line_naming_the_field(
    name: str, arguments: dict[str, Any], reason: str, tmp_path: Path
) -> None:
    async def call() -> None:
        async with bound_tool(name, tmp_path) as tool:
            await tool.invoke(arguments)

    with pytest.raises(InvalidArguments) as refused:
        asyncio.run(call())
    assert (refused.value.tool, refused.value.reason) == (name, reason)


def test_a_delegate_contract_names_only_the_callers_targets() -> None:
    contract = delegate_arguments("lead", TARGETS)
    assert contract is delegate_arguments("lead", TARGETS)  # built once per caller and targets
    assert contract.parameters()["properties"]["agent"]["enum"] == TARGETS
    with pytest.raises(InvalidArguments, match=r"^delegate: 'deep' is not an agent lead may delegate to \(allowed: helper, careful\)$"):
        contract.parse("delegate", {"agent": "deep", "task": "t"})
    with pytest.raises(ValueError, match="no agent to delegate to"):
        delegate_arguments("lead", ())
