"""The usage report `orchestrator usage`, `GET /api/usage` and `/usage` share: a window and its totals."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from orchestrator.errors import OrchestratorError
from orchestrator.store.usage import GROUPINGS, Grouping, UsageTotal

__all__ = ["BadUsageQuery", "UsageReport", "parse_grouping", "parse_since"]

_SPAN: Final = re.compile(r"(\d{1,6})([mhdw])")
_UNIT_S: Final = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class BadUsageQuery(OrchestratorError):
    """A `--since` or `--by` (or `since=` / `by=`) value that means nothing."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name} {value!r}: expected {expected}")


def parse_since(value: str, *, now: float, name: str = "--since") -> float | None:
    """Return the UNIX time `value` (`30m`, `12h`, `7d`, `2w`, or `all`) reaches back to; None = all."""
    text = value.strip().lower()
    if text == "all":
        return None
    match = _SPAN.fullmatch(text)
    if match is None or int(match[1]) == 0:
        raise BadUsageQuery(name, value, "a span like 30m, 12h, 7d, 2w, or all")
    return now - int(match[1]) * _UNIT_S[match[2]]


def parse_grouping(value: str, *, name: str = "--by") -> Grouping:
    """Return `value` as a grouping (`agent`, `sender` or `model`)."""
    if value == "agent":
        return "agent"
    if value == "sender":
        return "sender"
    if value == "model":
        return "model"
    raise BadUsageQuery(name, value, " or ".join(GROUPINGS))


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport:
    """Totals per group over a window, with the grand total."""

    by: Grouping
    since: float | None
    agent: str | None
    sender: str | None
    rows: tuple[UsageTotal, ...]

    @property
    def total(self) -> UsageTotal:
        """Return the sum of every row."""
        costs = [row.cost for row in self.rows if row.cost is not None]
        return UsageTotal(
            key="total",
            calls=sum(r.calls for r in self.rows),
            input_tokens=sum(r.input_tokens for r in self.rows),
            output_tokens=sum(r.output_tokens for r in self.rows),
            cached_tokens=sum(r.cached_tokens for r in self.rows),
            cache_write_tokens=sum(r.cache_write_tokens for r in self.rows),
            cost=sum(costs) if costs else None,
            estimated_calls=sum(r.estimated_calls for r in self.rows),
        )

    def describe(self) -> dict[str, object]:
        """Return the report as plain data (`--json`, `GET /api/usage`)."""
        return {
            "by": self.by,
            "since": _iso(self.since),
            "agent": self.agent,
            "sender": self.sender,
            "rows": [row.describe() for row in self.rows],
            "total": self.total.describe(),
        }

    def lines(self) -> list[str]:
        """Return the report as an aligned text table, one group a line, the total last."""
        window = f"since {_iso(self.since)}" if self.since is not None else "all time"
        where = "".join(f", {k} {v}" for k, v in (("agent", self.agent), ("sender", self.sender)) if v)
        head = f"usage {window}{where}, by {self.by}"
        if not self.rows:
            return [head, "no model calls recorded"]
        table: list[tuple[str, ...]] = [(self.by, "calls", "input", "cached", "cache_write", "output", "total", "cost")]
        for row in (*self.rows, self.total):
            table.append((
                row.key + (f" ({row.estimated_calls} estimated)" if row.estimated_calls else ""),
                str(row.calls), str(row.input_tokens), str(row.cached_tokens), str(row.cache_write_tokens),
                str(row.output_tokens),
                str(row.input_tokens + row.output_tokens), "-" if row.cost is None else f"{row.cost:.4f}",
            ))
        widths = [max(len(cells[i]) for cells in table) for i in range(len(table[0]))]
        out = [head]
        for cells in table:
            first = cells[0].ljust(widths[0])
            out.append("  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))]).rstrip())
        return out


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
