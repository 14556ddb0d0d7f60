"""One contract per tool: a tool's arguments declared once, as a pydantic model.

The model gives both halves of the contract: `ToolArguments.parameters()` is the JSON
schema the model sees (pydantic's, tidied: no titles, frozen, `const` written as a
one-value `enum`), and `ToolArguments.parse` is the validation the call gets, raising
`InvalidArguments` with one line naming the field. The model is strict (JSON types only,
no coercion: "5" is not an integer, `true` is not 1), forbids extra keys, and matches
patterns with Python's `re`, so what the schema admits and what validation admits are
the same set (tests/tools/test_contract_property.py shows it for every tool).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic_core import ErrorDetails

from orchestrator.errors import ToolFailure

__all__ = ["InvalidArguments", "NoNul", "NonBlank", "ToolArguments"]

# Patterns a field may use, with what a refusal says about the value.
_NOT_BLANK: Final = r"\S"
_NO_NUL: Final = r"^[^\x00]*$"
_PATTERN_MEANING: Final = MappingProxyType({_NOT_BLANK: "must not be blank", _NO_NUL: "must not contain a NUL character"})

NonBlank = Annotated[str, StringConstraints(pattern=_NOT_BLANK)]
"""A string holding at least one character that is not whitespace."""
NoNul = Annotated[str, StringConstraints(pattern=_NO_NUL)]
"""A string without a NUL character (a command argument)."""

_PLAIN_NAME: Final = re.compile(r"[\w.-]+", re.ASCII)
_KIND: Final = MappingProxyType({
    type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
    list: "an array", dict: "a JSON object",
})
_TYPE_PHRASE: Final = MappingProxyType({
    "string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
    "object": "a JSON object", "null": "null",
})
_PLURAL: Final = MappingProxyType({
    "string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans", "object": "JSON objects",
})


class InvalidArguments(ToolFailure):
    """A call's arguments break its tool's contract; nothing ran."""

    def __init__(self, tool: str, *, field: str, reason: str) -> None:
        self.field = field
        super().__init__(tool, reason)


class ToolArguments(BaseModel):
    """The one declaration of a tool's arguments: subclass it, one field per argument.

    Describe each field with `Field(description=...)`; constraints (`min_length`, `ge`,
    `NonBlank`, ...) land in the schema and in validation alike. `refusals` may replace
    the refusal line for one (field, pydantic error type) pair; it gets the refused value
    (field "" with "extra_forbidden": the unexpected names, joined).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, regex_engine="python-re")

    refusals: ClassVar[Mapping[tuple[str, str], Callable[[Any], str]]] = MappingProxyType({})

    @classmethod
    def parameters(cls) -> Mapping[str, Any]:
        """Return the JSON schema the model sees for these arguments (frozen, built once)."""
        return _parameters(cls)

    @classmethod
    def parse(cls, tool: str, arguments: Mapping[str, Any]) -> Self:
        """Return the checked arguments; raises `InvalidArguments` naming the first bad field."""
        try:
            return cls.model_validate(dict(arguments))
        except ValidationError as exc:
            raise _refusal(cls, tool, exc.errors()) from None


@cache
def _parameters(model: type[ToolArguments]) -> Mapping[str, Any]:
    schema = _tidy(model.model_json_schema())
    if "$defs" in schema:  # the providers' tool schemas are flat: no nested models, no references
        raise TypeError(f"{model.__name__}: a tool contract holds no nested model")
    schema.setdefault("required", [])
    ordered = {key: schema[key] for key in ("type", "properties", "required", "additionalProperties")}
    frozen: Mapping[str, Any] = _freeze(ordered)
    return frozen


def _tidy(schema: dict[str, Any]) -> dict[str, Any]:
    # pydantic titles every schema after its class or field name: noise the model pays for
    out = {key: value for key, value in schema.items() if key != "title"}
    if "const" in out:  # a one-value Literal; `enum` is what every provider understands
        out["enum"] = [out.pop("const")]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: _tidy(sub) for name, sub in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _tidy(out[key])
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_tidy(sub) for sub in out["anyOf"]]
    return out


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


def _refusal(model: type[ToolArguments], tool: str, errors: list[ErrorDetails]) -> InvalidArguments:
    extra = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if extra:
        names = ", ".join(_shown(name) for name in sorted(extra))
        hint = model.refusals.get(("", "extra_forbidden"))
        reason = hint(names) if hint is not None else f"unexpected argument(s): {names}"
        return InvalidArguments(tool, field=min(extra), reason=reason)
    missing = [e for e in errors if e["type"] == "missing"]
    error = missing[0] if missing else errors[0]
    field = _field_name(error["loc"])
    override = model.refusals.get((field, error["type"])) if len(error["loc"]) == 1 else None
    if override is not None:
        return InvalidArguments(tool, field=field, reason=override(error.get("input")))
    if error["type"] == "missing":
        return InvalidArguments(tool, field=field, reason=f"missing required argument {field!r}")
    subject = f"argument {field!r}" if len(error["loc"]) == 1 else field
    schema = _schema_at(model.parameters(), error["loc"])
    return InvalidArguments(tool, field=field, reason=f"{subject} {_problem(error, schema)}")


def _shown(name: str) -> str:
    # a name the model made up may hold anything; the refusal stays one readable line
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


def _field_name(loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else "arguments"
    for part in loc[1:]:
        name += f"[{part}]" if isinstance(part, int) else f"[{str(part)!r}]"
    return name


def _schema_at(schema: Mapping[str, Any], loc: tuple[int | str, ...]) -> Mapping[str, Any]:
    at: Mapping[str, Any] = schema
    for index, part in enumerate(loc):
        if index == 0:
            found = at.get("properties", {}).get(part)
        elif isinstance(part, int):
            found = at.get("items")
        else:
            found = at.get("additionalProperties")
        if not isinstance(found, Mapping):
            return MappingProxyType({})
        at = found
    return at


def _problem(error: ErrorDetails, schema: Mapping[str, Any]) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error.get("input")
    if kind.endswith("_type"):
        return f"must be {_phrase(schema)}, not {_KIND.get(type(value), type(value).__name__)}"
    if kind == "literal_error":
        allowed = tuple(schema.get("enum", ()))
        if len(allowed) == 1:
            return f"must be {allowed[0]!r}, not {value!r}"
        return f"must be one of {', '.join(repr(v) for v in allowed)}, not {value!r}"
    if kind in ("too_short", "too_long"):
        bound, word = (ctx.get("min_length"), "at least") if kind == "too_short" else (ctx.get("max_length"), "at most")
        return f"must hold {word} {bound} item{'' if bound == 1 else 's'}"
    if kind == "string_too_short":
        bound = ctx.get("min_length")
        return "must not be empty" if bound == 1 else f"must be at least {bound} characters"
    if kind == "string_too_long":
        return f"is {len(value)} characters; the limit is {ctx.get('max_length')}"
    if kind == "string_pattern_mismatch":
        return _PATTERN_MEANING.get(ctx.get("pattern", ""), f"must match the pattern {ctx.get('pattern')!r}")
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"must be an integer from {low} to {high}, not {value!r}"
        return f"must be {'at least' if low is not None else 'at most'} {low if low is not None else high}"
    return str(error["msg"]).lower()


def _phrase(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items", {})
        plural = _PLURAL.get(items.get("type", "")) if isinstance(items, Mapping) else None
        return f"an array of {plural}" if plural else "an array"
    if isinstance(kind, str):
        return _TYPE_PHRASE.get(kind, kind)
    return "a valid value"
