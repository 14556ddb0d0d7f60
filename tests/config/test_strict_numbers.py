"""Numbers and booleans are strict: a quoted `"8"` is a config error naming file and dotted key."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Strict

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.errors import ConfigError
from tests.conftest import WriteConfig

AGENT = '[providers.local]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.ops]\nprovider = "local"\nmodel = "m"\n'


def test_a_quoted_number_is_a_config_error_naming_file_and_key(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # The newcomer's step: `max_tool_iterations = "8"` used to be taken as 8.
    path = write_config(AGENT + '[agents.ops.budget]\nmax_tool_iterations = "8"\n')
    assert cli.main(["check", "--config", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: agents.ops.budget.max_tool_iterations: input should be a valid integer (got '8')"
    ]


@pytest.mark.parametrize(
    ("toml", "key", "message"),
    [
        ('temperature = "0.5"', "agents.ops.temperature", "input should be a valid number (got '0.5')"),
        ('acp_enable_mcp = "true"', "agents.ops.acp_enable_mcp", "input should be a valid boolean (got 'true')"),
        ("acp_enable_mcp = 1", "agents.ops.acp_enable_mcp", "input should be a valid boolean (got 1)"),
        ("[agents.ops.budget]\nmax_tool_iterations = 8.0", "agents.ops.budget.max_tool_iterations",
         "input should be a valid integer (got 8.0)"),
        ("[agents.ops.budget]\nmax_tool_iterations = true", "agents.ops.budget.max_tool_iterations",
         "input should be a valid integer (got True)"),
    ],
)
def test_strings_floats_and_booleans_are_not_coerced(
    write_config: WriteConfig, toml: str, key: str, message: str
) -> None:
    path = write_config(AGENT + toml + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [f"{path}: {key}: {message}"]


def test_an_integer_for_a_float_field_stays_fine(write_config: WriteConfig) -> None:
    config = load_config(write_config(AGENT + "temperature = 1\n[agents.ops.budget]\nturn_timeout_s = 30\n"))
    assert config.agents["ops"].temperature == 1.0
    assert config.agents["ops"].budget.turn_timeout_s == 30.0


def _scalar_fields(model: type[BaseModel], base: str, seen: set[type[BaseModel]]) -> Iterator[tuple[str, bool]]:
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        for part in _parts(info.annotation):
            if part in (int, float, bool):
                yield f"{base}{model.__name__}.{name}", any(isinstance(m, Strict) and m.strict for m in info.metadata)
            elif isinstance(part, type) and issubclass(part, BaseModel):
                yield from _scalar_fields(part, base, seen)


def _parts(annotation: object) -> Iterator[object]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _parts(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType, dict, tuple, list):
        for arg in typing.get_args(annotation):
            yield from _parts(arg)
    else:
        yield annotation


def test_every_number_and_boolean_in_the_config_is_strict() -> None:
    """A new int/float/bool key must be `Field(..., strict=True)` too (this walks every model)."""
    fields = dict(_scalar_fields(Config, "", set()))
    assert len(fields) > 30
    assert sorted(name for name, strict in fields.items() if not strict) == []


def test_the_example_config_still_loads() -> None:
    assert load_config(Path(__file__).resolve().parents[2] / "config.example.toml").agents
