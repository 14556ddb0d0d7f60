"""The text an approver reads: every argument, in the tool's schema order, cut visibly to fit.

The core hands each surface the whole call (`ApprovalArguments`); each fits it to its own
room with `fit(limit)`: a chat platform to what its message holds, the CLI and the terminal
to one line of `APPROVAL_PREVIEW_CHARS`. `whole` is the call uncut (what `/show ID` sends,
in pieces). Every name and value is shown through the printable set (`policy.printable`):
invisible, filler and non-ASCII space characters escaped, long blank runs counted, words
mixing scripts flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from orchestrator.policy.printable import shown_value

__all__ = ["APPROVAL_PREVIEW_CHARS", "ApprovalArguments", "render_arguments"]

# One line a person reads at a glance: the CLI's y/N prompt (and the terminal channel's).
APPROVAL_PREVIEW_CHARS: Final = 500
# Each value keeps at least this much (the cut marker and a few characters either side).
_MIN_VALUE_CHARS: Final = 24
_NAME_CHARS: Final = 64
# What heads a fitted line when a word in it mixes scripts (a cut could hide the word's own flag).
_MIXED_NOTICE: Final = "[mixed scripts in: {}] "


@dataclass(frozen=True, slots=True)
class ApprovalArguments:
    """A tool call's arguments in full as an approver reads them: names in schema order,
    values as JSON through the printable set (rendered once, fitted often)."""

    items: tuple[tuple[str, str], ...]
    # the names (as shown) of the arguments with a word that mixes scripts
    mixed: tuple[str, ...] = ()

    @classmethod
    def of(cls, arguments: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> ApprovalArguments:
        """Order `arguments` as `schema`'s `properties` (then any extra keys as given).

        The model's key order cannot push a name out of view.
        """
        properties = schema.get("properties") if schema is not None else None
        declared = [k for k in properties if k in arguments] if isinstance(properties, Mapping) else []
        order = declared + [k for k in arguments if k not in declared]
        items, mixed = [], []
        for key in order:
            name, value = shown_value(str(key)), shown_value(arguments[key])
            items.append((name.text, value.text))
            if name.mixed or value.mixed:
                mixed.append(name.text)
        return cls(tuple(items), tuple(mixed))

    @property
    def whole(self) -> str:
        """Return the arguments uncut, as one line (what `fit` returns when nothing needs cutting)."""
        return self._notice() + "{" + ", ".join(f"{name}: {value}" for name, value in self.items) + "}"

    def lines(self) -> list[str]:
        """Return the arguments uncut, one `name: value` line each (for `/show ID`)."""
        head = [self._notice().rstrip()] if self.mixed else []
        return head + [f"{name}: {value}" for name, value in self.items]

    def _notice(self) -> str:
        return _MIXED_NOTICE.format(", ".join(_elided(name, _NAME_CHARS) for name in self.mixed)) if self.mixed else ""

    def fit(self, limit: int) -> str:
        """Return the arguments as one JSON-like line of at most `limit` characters.

        Values are JSON (a value cannot start a line, invisible and control characters are
        escaped); a long one keeps its start and end around a visible `…[N chars cut]…`, the
        values sharing equally what the names leave. Within `limit`, nothing is cut. When a
        word mixes scripts the line starts with `[mixed scripts in: NAMES]`, so no cut hides it.
        """
        if not self.items:
            return "{}"
        notice = self._notice()[:limit]
        limit -= len(notice)
        names = [_elided(name, _NAME_CHARS) for name, _ in self.items]
        values = [value for _, value in self.items]
        budget = limit - sum(len(n) + 4 for n in names)  # "{}" and ", " between, ": " in each
        caps = _shares(budget, [len(v) for v in values])
        items = [f"{name}: {_elided(value, cap)}" for name, value, cap in zip(names, values, caps)]
        return notice + _fitted(items, limit)


def render_arguments(
    arguments: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    *,
    limit: int = APPROVAL_PREVIEW_CHARS,
) -> str:
    """Return the arguments in `schema` order as one line of at most `limit` characters."""
    return ApprovalArguments.of(arguments, schema).fit(limit)


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
