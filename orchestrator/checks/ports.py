"""Every port the config would listen on, tried here: one already in use is named with its holder.

The gateway, a Telegram webhook and a Slack HTTP-mode channel each listen. Binding the
address the way aiohttp will (SO_REUSEADDR) and closing it at once tells whether `run`
could; the holder is found through /proc/net/tcp{,6} (the listening socket's inode) and
/proc/PID/fd (the process holding it). A port held by the daemon that already serves this
config's state directory is what a reload keeps: a note, not a problem.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.config import Config, SlackChannelConfig, TelegramChannelConfig
from orchestrator.errors import ConfigProblem
from orchestrator.store import state_lock_holder

__all__ = ["Listener", "listeners", "port_problems"]

_LISTEN_STATE: Final = "0A"  # TCP_LISTEN in /proc/net/tcp


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """One address the daemon would listen on, and the key that sets its port."""

    host: str
    port: int
    key: str


def listeners(config: Config) -> Iterator[Listener]:
    """Yield every address `run` would listen on (a port 0 is any free one: never in use)."""
    gateway = config.gateway
    if gateway is not None and gateway.port:
        yield Listener(host=gateway.listen, port=gateway.port, key="gateway.port")
    for name, channel in config.channels.items():
        if isinstance(channel, TelegramChannelConfig) and channel.mode == "webhook":
            yield Listener(host=channel.webhook_listen, port=channel.webhook_port, key=f"channels.{name}.webhook_port")
        elif isinstance(channel, SlackChannelConfig) and channel.mode == "http" and channel.http_port:
            yield Listener(host=channel.http_listen, port=channel.http_port, key=f"channels.{name}.http_port")


def port_problems(config: Config, *, shown: str) -> tuple[list[ConfigProblem], list[str]]:
    """Return (one problem per port `run` could not listen on, notes on ports this config's daemon holds)."""
    problems: list[ConfigProblem] = []
    notes: list[str] = []
    seen: dict[int, str] = {}
    daemon = state_lock_holder(config.state_path())
    for listener in listeners(config):
        where = f"{listener.host}:{listener.port}"
        first = seen.setdefault(listener.port, listener.key)
        if first != listener.key:
            problems.append(ConfigProblem(
                shown, listener.key, f"port {listener.port} is also {first}: give each listener its own port"
            ))
            continue
        error = _bind_error(listener.host, listener.port)
        if error is None:
            continue
        if error.errno != errno.EADDRINUSE:
            problems.append(ConfigProblem(
                shown, listener.key, f"cannot listen on {where} ({error.strerror or error}): `run` would fail here"
            ))
            continue
        holders = _holders(listener.port)
        # a holder this user cannot see while this state directory's daemon runs is most likely that daemon
        if daemon is not None and (daemon in holders or not holders):
            notes.append(
                f"note: {shown}: {listener.key}: {where} is held by the daemon running on this state directory "
                f"(pid {daemon}); it keeps the port across a reload"
            )
            continue
        held = ", ".join(f"pid {pid} ({_command(pid)})" for pid in sorted(holders)) if holders else None
        problems.append(ConfigProblem(
            shown, listener.key,
            f"{where} is in use" + (f" by {held}" if held else " (by a process this user cannot see)")
            + ": stop it, or choose another port",
        ))
    return problems, notes


def _bind_error(host: str, port: int) -> OSError | None:
    """Bind `host:port` as aiohttp's server would, then close; return the error, None when it binds."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return OSError(errno.EADDRNOTAVAIL, f"{host!r} does not resolve: {exc.strerror}")
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return exc
    return None


def _holders(port: int) -> set[int]:
    """Return the pids holding a listening TCP socket on `port` (those this user may look at)."""
    inodes = set(_listening_inodes(port))
    if not inodes:
        return set()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    pids.add(int(entry.name))
                    break
        except OSError:  # gone meanwhile, or another user's
            continue
    return pids


def _listening_inodes(port: int) -> Iterator[str]:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == _LISTEN_STATE and int(fields[1].rpartition(":")[2], 16) == port:
                yield fields[9]


def _command(pid: int) -> str:
    """Return the process's name (`comm`), with the script or module for an interpreter; never its arguments."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        argv = [part.decode(errors="replace") for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return "?"
    if name.startswith("python") and len(argv) > 1:
        what = argv[2] if argv[1] == "-m" and len(argv) > 2 else argv[1]
        return f"{name} {'-m ' if argv[1] == '-m' else ''}{what}"
    return name or "?"
