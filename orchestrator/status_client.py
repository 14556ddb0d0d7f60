"""Asking the running daemon for its status document, and showing it (`orchestrator status`).

The client half of the status socket (`orchestrator/daemon/status_socket.py` serves it):
stdlib only, so `orchestrator status` starts without importing the daemon. The exchange is
one line each way: `status`, then the document as one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from orchestrator.errors import OrchestratorError

__all__ = [
    "MAX_REQUEST",
    "REQUEST",
    "DaemonNotRunning",
    "addressable",
    "ask_status",
    "status_lines",
    "status_socket_path",
]

REQUEST: Final = b"status\n"
MAX_REQUEST: Final = 64
_MAX_ANSWER: Final = 4 * 1024 * 1024
_SUN_PATH_MAX: Final = 107  # sockaddr_un.sun_path holds 108 bytes with the final NUL
_SHA_SHOWN: Final = 12


class DaemonNotRunning(OrchestratorError):
    """No daemon answers on the status socket (it is missing, refused or silent)."""

    def __init__(self, *, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"no daemon is running for this state dir ({path}: {reason})")


def status_socket_path(state_dir: Path) -> Path:
    """Return where the daemon serving `state_dir` listens for `orchestrator status`."""
    return state_dir / "run" / "status.sock"


def ask_status(state_dir: Path, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """Return the status document of the daemon serving `state_dir`.

    Raises `DaemonNotRunning` when the socket is missing, refuses the connection or does
    not answer within `timeout_s`.
    """
    path = status_socket_path(state_dir)
    if not path.exists():
        raise DaemonNotRunning(path=path, reason="no socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        try:
            with addressable(path) as address:
                client.connect(address)
            client.sendall(REQUEST)
            answer = _read_line(client)
        except ConnectionRefusedError:
            raise DaemonNotRunning(path=path, reason="connection refused: the daemon is gone") from None
        except TimeoutError:
            raise DaemonNotRunning(path=path, reason=f"no answer within {timeout_s:g}s") from None
        except PermissionError:
            raise DaemonNotRunning(path=path, reason="permission denied: run as the daemon's user") from None
        except OSError as exc:
            raise DaemonNotRunning(path=path, reason=exc.strerror or str(exc)) from None
    try:
        document = json.loads(answer)
    except ValueError:
        raise DaemonNotRunning(path=path, reason="the answer was not a status document") from None
    if not isinstance(document, dict) or "schema" not in document:
        raise DaemonNotRunning(path=path, reason="the answer was not a status document")
    return document


def _read_line(client: socket.socket) -> bytes:
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = client.recv(65536)
        if not chunk:
            break
        answer += chunk
        if len(answer) > _MAX_ANSWER:
            break
    return answer


@contextlib.contextmanager
def addressable(path: Path) -> Iterator[str]:
    """Yield an address for `path` that fits `sun_path`: itself, or through its folder's descriptor."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


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
