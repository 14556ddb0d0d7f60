"""The status document: one JSON value built from the running daemon, pinned in docs/status.md.

`orchestrator status`, `/health?detail=1` and the coming admin page all show this one
document; `build_status` is the only place it is put together. Every string that came from
outside (an error's text) goes through the one redactor first.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections import deque
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from orchestrator.lifecycle import Lifecycle
from orchestrator.redaction import redact
from orchestrator.seam import Services
from orchestrator.store import Backlog

if TYPE_CHECKING:
    from loguru import Message

    from orchestrator.daemon.channels import ChannelStatus

__all__ = ["SCHEMA_VERSION", "RecentErrors", "StatusSource", "build_status", "config_digest", "instance"]

# Bumped when a field changes meaning or goes away (a new field does not bump it).
SCHEMA_VERSION: Final = 1
_ERRORS_KEPT: Final = 20
_MESSAGE_CHARS: Final = 500  # one error line in the document; the log has the whole of it
_ERROR_LEVEL: Final = 40  # loguru's ERROR


class _Channels(Protocol):
    def status(self) -> Mapping[str, ChannelStatus]: ...


class _Store(Protocol):
    def backlog(self) -> Backlog: ...


class _Approvals(Protocol):
    def __len__(self) -> int: ...

    def oldest_asked_at(self) -> float | None: ...


class StatusSource(Protocol):
    """What the document reads of the daemon (its `Runtime` is one)."""

    @property
    def config_path(self) -> Path | None: ...

    @property
    def config_sha256(self) -> str | None: ...

    @property
    def started_at(self) -> float: ...

    @property
    def accepting(self) -> bool: ...

    @property
    def inflight(self) -> int: ...

    @property
    def channels(self) -> _Channels: ...

    @property
    def services(self) -> Services: ...

    @property
    def store(self) -> _Store: ...

    @property
    def approvals(self) -> _Approvals: ...

    @property
    def errors(self) -> RecentErrors: ...


def build_status(source: StatusSource, *, now: float | None = None) -> dict[str, Any]:
    """Return the status document of `source` as it is now (the schema in docs/status.md)."""
    now = time.time() if now is None else now
    backlog = source.store.backlog()
    return {
        "schema": SCHEMA_VERSION,
        "version": _package_version(),
        "instance": instance(),
        "started_at": round(source.started_at, 3),
        "uptime_s": round(max(0.0, now - source.started_at), 3),
        "accepting": source.accepting,
        "config": {
            "path": str(source.config_path) if source.config_path is not None else None,
            "sha256": source.config_sha256,
        },
        "channels": [
            {
                "name": name,
                "kind": row.kind,
                "state": row.state.value,
                "since": round(row.since, 3),
                "last_error": _redacted(row.last_error),
            }
            for name, row in sorted(source.channels.status().items())
        ],
        "mcp_servers": _servers(source.services),
        "turns_running": source.inflight,
        "inbox": {"depth": backlog.depth, "oldest_age_s": _age(backlog.oldest_received, now)},
        "deliveries": {"waiting": backlog.waiting, "oldest_age_s": _age(backlog.oldest_queued, now)},
        "approvals": {"pending": len(source.approvals), "oldest_age_s": _age(source.approvals.oldest_asked_at(), now)},
        "last_errors": source.errors.rows(),
    }


def instance() -> dict[str, Any]:
    """Return this process's instance: its id (`host:pid` until instances share a store), host and pid."""
    host, pid = socket.gethostname(), os.getpid()
    return {"id": f"{host}:{pid}", "host": host, "pid": pid}


def config_digest(path: Path | None) -> str | None:
    """Return the sha256 of the config file as it is on disk now, None without one (or unreadable)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class RecentErrors:
    """The last errors the daemon logged, redacted and bounded: a loguru sink (`attach`).

    It keeps every ERROR line and every lifecycle line (a channel or server that became
    degraded, reconnecting or stopped with an error), the newest last.
    """

    def __init__(self, *, keep: int = _ERRORS_KEPT) -> None:
        self._rows: deque[dict[str, Any]] = deque(maxlen=keep)

    def attach(self) -> int:
        """Add the sink to loguru; return its id for `logger.remove`."""
        from loguru import logger

        # WARNING, not lower: a sink at DEBUG would make every debug call build its record.
        return logger.add(self._write, level="WARNING", format="{message}", filter=_kept, catch=True)

    def rows(self) -> list[dict[str, Any]]:
        """Return the kept errors, oldest first."""
        return list(self._rows)

    def _write(self, message: Message) -> None:
        record = message.record
        where = record["extra"].get("lifecycle") or record["name"] or "daemon"
        self._rows.append({
            "at": round(record["time"].timestamp(), 3),
            "where": str(where),
            "message": redact(record["message"])[:_MESSAGE_CHARS],
        })


def _kept(record: Any) -> bool:
    return bool(record["level"].no >= _ERROR_LEVEL or "lifecycle" in record["extra"])


def _servers(services: Services) -> list[dict[str, Any]]:
    """One row per MCP server: a per-agent server's connections folded into one state."""
    pool = services.mcp
    by_server: dict[str, list[tuple[Lifecycle, float, str | None]]] = {}
    for connection in pool.status() if pool is not None else ():
        by_server.setdefault(connection.server, []).append(
            (connection.lifecycle, connection.since, connection.last_error)
        )
    rows = []
    for name in sorted(by_server):
        connections = by_server[name]
        errors = [error for _, since, error in sorted(connections, key=lambda c: c[1]) if error]
        rows.append({
            "name": name,
            "state": _folded(state for state, _, _ in connections).value,
            "since": round(max(since for _, since, _ in connections), 3),
            "last_error": _redacted(errors[-1] if errors else None),
        })
    return rows


def _folded(states: Iterable[Lifecycle]) -> Lifecycle:
    """One state for several connections: all alike is that state; some ready and some not is degraded."""
    seen = set(states)
    if len(seen) == 1:
        return seen.pop()
    if Lifecycle.READY in seen or Lifecycle.DEGRADED in seen:
        return Lifecycle.DEGRADED
    for state in (Lifecycle.RECONNECTING, Lifecycle.CONNECTING):
        if state in seen:
            return state
    return Lifecycle.STOPPED


def _age(at: float | None, now: float) -> float | None:
    return None if at is None else round(max(0.0, now - at), 3)


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)[:_MESSAGE_CHARS]


def _package_version() -> str:
    try:
        return version("orchestrator")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
