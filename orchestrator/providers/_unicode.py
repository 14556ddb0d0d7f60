"""Text from a provider made valid Unicode where it enters: no unpaired surrogate gets past.

JSON may carry a lone `\\ud800` escape, which Python decodes to a str that no UTF-8 writer
(SQLite, a platform's JSON, the log) accepts; one such character would fail the turn far from
here. Each is replaced by U+FFFD (and two halves of a pair that arrived apart are joined).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Final

from orchestrator.providers.base import Completion, ToolCall

__all__ = ["well_formed", "well_formed_completion"]

# A surrogate's JSON escape: tool-call arguments are JSON text, decoded later by the engine.
_ESCAPED_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def well_formed(text: str) -> str:
    """Return `text` with every unpaired surrogate replaced by U+FFFD (itself when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 round trip: adjacent halves become their character, lone ones U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def well_formed_completion(completion: Completion) -> Completion:
    """Return `completion` with its text and tool calls `well_formed`."""
    text = well_formed(completion.text) if completion.text is not None else None
    calls = tuple(_call(call) for call in completion.tool_calls)
    if text == completion.text and all(a is b for a, b in zip(calls, completion.tool_calls)):
        return completion
    return replace(completion, text=text, tool_calls=calls)


def _call(call: ToolCall) -> ToolCall:
    fixed = (well_formed(call.id), well_formed(call.name), _arguments(well_formed(call.arguments)))
    if fixed == (call.id, call.name, call.arguments):
        return call
    return ToolCall(id=fixed[0], name=fixed[1], arguments=fixed[2])


def _arguments(text: str) -> str:
    """Return JSON text whose decoded strings are `well_formed` (re-encoded only when one was not)."""
    if _ESCAPED_SURROGATE.search(text) is None:
        return text
    try:
        value = json.loads(text)
    except ValueError:  # not JSON: the engine reports it to the model as it is
        return text
    fixed = _deep(value)
    return text if fixed == value else json.dumps(fixed)


def _deep(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        return [_deep(item) for item in value]
    if isinstance(value, dict):
        return {well_formed(key): _deep(item) for key, item in value.items()}
    return value
