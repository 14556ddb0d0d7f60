"""sd_notify and the watchdog, spoken directly on $NOTIFY_SOCKET.

The protocol is one datagram per state on a Unix socket; ten lines here are simpler and
lighter than a dependency (python-systemd needs libsystemd headers to build).
"""

from __future__ import annotations

import os
import socket

__all__ = ["notify", "watchdog_interval_s"]


def notify(state: str) -> bool:
    """Send `state` (e.g. "READY=1") to systemd; False when not running under systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(state.encode())
    return True


def watchdog_interval_s() -> float | None:
    """Return how often to ping the watchdog (half of WatchdogSec), or None if it is off."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 1_000_000 / 2
