"""The status document as lines for a person (`orchestrator status` without `--json`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["status_lines"]

_SHA_SHOWN: Final = 12


def status_lines(document: Mapping[str, Any]) -> list[str]:
    """Return `document` (docs/status.md) as the lines `orchestrator status` prints."""
    instance, config = document["instance"], document["config"]
    serving = "serving" if document["accepting"] else "stopping"
    lines = [
        f"orchestrator {document['version']}: {serving}, up {_duration(document['uptime_s'])}"
        f" (pid {instance['pid']} on {instance['host']})",
        f"config: {config['path'] or '-'} (sha256 {(config['sha256'] or '-')[:_SHA_SHOWN]})",
        "channels:" if document["channels"] else "channels: none",
    ]
    lines += _rows(document["channels"], kind=True)
    lines.append("mcp servers:" if document["mcp_servers"] else "mcp servers: none")
    lines += _rows(document["mcp_servers"], kind=False)
    inbox, deliveries, approvals = document["inbox"], document["deliveries"], document["approvals"]
    lines += [
        f"turns running: {document['turns_running']}",
        f"inbox: {inbox['depth']}{_oldest(inbox['oldest_age_s'])}",
        f"replies waiting for delivery: {deliveries['waiting']}{_oldest(deliveries['oldest_age_s'])}",
        f"approvals pending: {approvals['pending']}{_oldest(approvals['oldest_age_s'])}",
    ]
    errors = document["last_errors"]
    lines.append(f"last errors ({len(errors)}):" if errors else "last errors: none")
    lines += [f"  {_clock(e['at'])}  {e['where']}: {e['message']}" for e in errors]
    return lines


def _rows(rows: Sequence[Mapping[str, Any]], *, kind: bool) -> list[str]:
    width = max((len(r["name"]) for r in rows), default=0)
    out = []
    for row in rows:
        shown = f"  {row['name']:<{width}}  "
        if kind:
            shown += f"{row['kind']:<9} "
        shown += f"{row['state']:<12} since {_clock(row['since'])}"
        if row["last_error"] and row["state"] != "ready":
            shown += f"  ({row['last_error']})"
        out.append(shown)
    return out


def _oldest(age_s: float | None) -> str:
    return "" if age_s is None else f" (oldest {_duration(age_s)} ago)"


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    return f"{hours // 24}d {hours % 24}h"


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
