"""Schema and validation agree for every tool of ours: both come from its one contract.

Arguments are drawn from each tool's JSON schema (the one the model sees) by the small
strategies in `contract_kit` (the schema subset our contracts use; hypothesis-jsonschema
is not needed for it), and judged by a JSON-schema validator. What the schema admits, the
call accepts (the tool may still refuse it for a reason of its own, never as bad
arguments); what it refuses, the call refuses with one line naming the field, before the
tool does anything.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings

from orchestrator.errors import ToolFailure
from orchestrator.tools import InvalidArguments
from tests.tools.contract_kit import (
    OUR_TOOLS,
    SUPPORTED,
    admitted,
    anything,
    bound_tool,
    keywords_of,
    refused,
    schema_admits,
)

ROOT: Final = Path(tempfile.mkdtemp(prefix="orchestrator-contracts-"))
atexit.register(shutil.rmtree, ROOT, True)
# examples per tool and property: 3 properties x 12 tools x these
EXAMPLES: Final = 100
_SETTINGS: Final = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _outcome(name: str, arguments: dict[str, Any]) -> InvalidArguments | ToolFailure | str:
    async def call() -> InvalidArguments | ToolFailure | str:
        async with bound_tool(name, ROOT / name) as tool:
            try:
                return await tool.invoke(arguments)
            except ToolFailure as exc:  # InvalidArguments included
                return exc

    return asyncio.run(call())


def _schema(name: str) -> Any:
    async def spec() -> Any:
        async with bound_tool(name, ROOT / name) as tool:
            return tool.spec.parameters

    return asyncio.run(spec())


@pytest.mark.parametrize("name", OUR_TOOLS)
def test_every_schema_keyword_is_one_the_strategies_draw(name: str) -> None:
    assert keywords_of(_schema(name)) <= SUPPORTED


@pytest.mark.parametrize("name", OUR_TOOLS)
def test_what_the_schema_admits_the_call_accepts(name: str) -> None:
    schema = _schema(name)

    @_SETTINGS
    @given(arguments=admitted(schema))
    def check(arguments: dict[str, Any]) -> None:
        assert schema_admits(schema, arguments)
        outcome = _outcome(name, arguments)
        assert not isinstance(outcome, InvalidArguments), outcome

    check()


@pytest.mark.parametrize("name", OUR_TOOLS)
def test_what_the_schema_refuses_the_call_refuses_naming_the_field(name: str) -> None:
    schema = _schema(name)

    @_SETTINGS
    @given(case=refused(schema))
    def check(case: tuple[str, dict[str, Any]]) -> None:
        field, arguments = case
        assert not schema_admits(schema, arguments)
        outcome = _outcome(name, arguments)
        assert isinstance(outcome, InvalidArguments), outcome
        assert outcome.tool == name and (outcome.field == field or outcome.field.startswith(f"{field}["))
        assert (field in outcome.reason or repr(field) in outcome.reason) and "\n" not in outcome.reason

    check()


@pytest.mark.parametrize("name", OUR_TOOLS)
def test_schema_and_call_agree_on_any_object(name: str) -> None:
    schema = _schema(name)

    @_SETTINGS
    @given(arguments=anything(schema))
    def check(arguments: dict[str, Any]) -> None:
        outcome = _outcome(name, arguments)
        assert schema_admits(schema, arguments) is not isinstance(outcome, InvalidArguments), (arguments, outcome)

    check()
