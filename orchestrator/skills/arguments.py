"""Typed skill-tool arguments: the checks that keep a model's value from injecting into argv or a URL."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from orchestrator.errors import ToolFailure

__all__ = ["ArgType", "ArgumentSpec", "bind_arguments", "parameters_schema"]

ArgType = Literal["string", "integer", "boolean"]
# Characters that end an argv element's meaning or a log line: never inside a value.
_FORBIDDEN: Final = {"\x00": "a NUL character", "\n": "a newline", "\r": "a carriage return"}
_MISSING: Final = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentSpec:
    """One declared argument of a skill tool and the rules its values must meet."""

    name: str
    type: ArgType
    description: str
    required: bool
    default: str | int | bool | None
    pattern: re.Pattern[str] | None
    allow_dash: bool

    def schema(self) -> Mapping[str, Any]:
        """Return this argument's JSON-schema property."""
        prop: dict[str, Any] = {"type": self.type}
        if self.description:
            prop["description"] = self.description
        if self.pattern is not None:
            prop["pattern"] = self.pattern.pattern
        if self.default is not None:
            prop["default"] = self.default
        return MappingProxyType(prop)

    def refusal(self, value: object) -> str | None:
        """Return why `value` may not be used for this argument, or None when it may."""
        if self.type == "boolean":
            return None if isinstance(value, bool) else f"must be a boolean, not {_kind(value)}"
        if self.type == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            return f"must be an integer, not {_kind(value)}"
        if self.type == "string" and not isinstance(value, str):
            return f"must be a string, not {_kind(value)}"
        text = self.render(value)
        for char, label in _FORBIDDEN.items():
            if char in text:
                return f"contains {label}"
        if text.startswith("-") and not self.allow_dash:
            return f"{text[:40]!r} starts with '-' (it could be read as an option)"
        if self.pattern is not None and self.pattern.fullmatch(text) is None:
            return f"{text[:40]!r} does not match the pattern {self.pattern.pattern!r}"
        return None

    def render(self, value: object) -> str:
        """Return a checked value as the text put into the template."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


def parameters_schema(arguments: Sequence[ArgumentSpec]) -> Mapping[str, Any]:
    """Return the JSON schema the model is given for these arguments."""
    return MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType({a.name: a.schema() for a in arguments}),
            "required": tuple(a.name for a in arguments if a.required),
            "additionalProperties": False,
        }
    )


def bind_arguments(
    arguments: Sequence[ArgumentSpec], given: Mapping[str, Any], *, tool: str
) -> dict[str, str]:
    """Return each argument's checked text, defaults filled in.

    Raises `ToolFailure` for an unknown or missing argument and for any value that breaks
    its type, pattern, dash or character rules; nothing runs with a refused value.
    """
    declared = {a.name for a in arguments}
    unknown = sorted(set(given) - declared)
    if unknown:
        raise ToolFailure(tool, f"unexpected argument(s): {', '.join(unknown)}")
    bound: dict[str, str] = {}
    for spec in arguments:
        value = given.get(spec.name, _MISSING)
        if value is _MISSING or value is None:
            if spec.required:
                raise ToolFailure(tool, f"missing required argument {spec.name!r}")
            value = spec.default
        refusal = spec.refusal(value)
        if refusal is not None:
            raise ToolFailure(tool, f"argument {spec.name!r} refused: {refusal}")
        bound[spec.name] = spec.render(value)
    return bound


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", str: "a string", float: "a number"}.get(
        type(value), "an array or object" if isinstance(value, (list, dict)) else type(value).__name__
    )
