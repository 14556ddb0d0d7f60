"""The text an approver reads: every argument, in the tool's schema order, cut visibly to fit."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["APPROVAL_PREVIEW_CHARS", "render_arguments"]

# The smallest budget any channel gives the preview (Slack's section, after escaping `&<>`
# can grow it fivefold, still fits), so every channel and the CLI show the same text.
APPROVAL_PREVIEW_CHARS: Final = 500
# Each value keeps at least this much (the cut marker and a few characters either side).
_MIN_VALUE_CHARS: Final = 24
_NAME_CHARS: Final = 64
# Characters that would let a value fake a new line or reorder what the approver reads.
_INVISIBLE: Final = frozenset({"Cc", "Cf", "Zl", "Zp"})


def render_arguments(
    arguments: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    *,
    limit: int = APPROVAL_PREVIEW_CHARS,
) -> str:
    """Return the arguments as one JSON-like line of at most `limit` characters.

    Names come in the order of `schema`'s `properties` (the model's key order cannot
    push one out of view), then any extra keys as given. Values are JSON (a value cannot
    start a line, invisible and control characters are escaped); a long one keeps its
    start and end around a visible `…[N chars cut]…`, the values sharing equally what
    the names leave.
    """
    if not arguments:
        return "{}"
    properties = schema.get("properties") if schema is not None else None
    declared = [k for k in properties if k in arguments] if isinstance(properties, Mapping) else []
    order = declared + [k for k in arguments if k not in declared]
    names = [_elided(_value(str(key)), _NAME_CHARS) for key in order]
    values = [_value(arguments[key]) for key in order]
    budget = limit - sum(len(n) + 4 for n in names)  # "{}" and ", " between, ": " in each
    caps = _shares(budget, [len(v) for v in values])
    items = [f"{name}: {_elided(value, cap)}" for name, value, cap in zip(names, values, caps)]
    return _fitted(items, limit)


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in _INVISIBLE else c for c in text
    )


def _shares(budget: int, lengths: Sequence[int]) -> list[int]:
    """Split `budget` so short values are whole and long ones share the rest equally."""
    caps = [0] * len(lengths)
    left, count = budget, len(lengths)
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        fair = max(left // count, _MIN_VALUE_CHARS)
        caps[index] = min(lengths[index], fair)
        left -= caps[index]
        count -= 1
    return caps


def _elided(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    widest = f"…[{len(text)} chars cut]…"
    keep = max(cap - len(widest), 0)
    head, tail = (keep + 1) // 2, keep // 2
    marker = f"…[{len(text) - keep} chars cut]…"
    return text[:head] + marker + (text[len(text) - tail:] if tail else "")


def _fitted(items: list[str], limit: int) -> str:
    """Join `items`; when there are too many names for `limit`, say how many were cut."""
    text = "{" + ", ".join(items) + "}"
    if len(text) <= limit:
        return text
    for shown in range(len(items) - 1, -1, -1):
        text = "{" + ", ".join([*items[:shown], f"…[{len(items) - shown} more arguments cut]…"]) + "}"
        if len(text) <= limit:
            return text
    return text[:limit]
