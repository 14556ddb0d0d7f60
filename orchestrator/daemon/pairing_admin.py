"""`orchestrator pairing list|approve|deny|revoke`: an admin decides pairings by writing the state store.

It works with the daemon stopped or running: both open `<state_dir>/pairing.sqlite3` (WAL),
and the daemon reads the stored pairings on every message of a pairing route, so an
approval or a revoke holds from the sender's next message. Nothing is written into TOML.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Final, TextIO

from orchestrator.config import Config
from orchestrator.seam import CODE_ALPHABET, CODE_LENGTH, CODE_TTL_S, pairing_in_use, route_by_id
from orchestrator.store import PairingAudit, PairingStore

__all__ = ["ADMIN", "paired_routes", "run_pairing_admin"]

ADMIN: Final = "admin (orchestrator pairing)"  # `decided_by` of the CLI's decisions


def run_pairing_admin(
    config: Config,
    action: str,
    *,
    code: str | None = None,
    channel: str | None = None,
    sender: str | None = None,
    route: str | None = None,
    as_json: bool = False,
    out: TextIO,
    err: TextIO,
) -> int:
    """Run one `orchestrator pairing` action; return the exit code (1: nothing matched)."""
    state, now = config.state_path(), time.time()
    with (
        PairingStore(state / "pairing.sqlite3", alphabet=CODE_ALPHABET, length=CODE_LENGTH, ttl_s=CODE_TTL_S) as store,
        PairingAudit(state / "audit.sqlite3") as audit,
    ):
        if action == "list":
            pending, paired = store.pending(now=now), store.paired()
            if as_json:
                shown = {"pending": [asdict(c) for c in pending], "paired": [asdict(p) for p in paired]}
                print(json.dumps(shown, indent=2), file=out)
                return 0
            print(f"pending codes: {len(pending)}", file=out)
            for c in pending:
                left = max(0, int((c.created + CODE_TTL_S - now) // 60))
                name = f" ({c.sender_name})" if c.sender_name else ""
                print(f"  {c.code}  {c.channel}:{c.sender}{name}  route {c.route}  expires in {left} min", file=out)
            print(f"paired senders: {len(paired)}", file=out)
            for p in paired:
                gone = "" if route_by_id(config, p.route) is not None else "  (route no longer in the config)"
                print(f"  {p.channel}:{p.sender}  route {p.route}  approved by {p.approved_by}{gone}", file=out)
            return 0
        if action in ("approve", "deny"):
            assert code is not None
            found = store.find(code, now=now)
            if found is None:
                print(f"orchestrator pairing: no pending code {code.strip().upper()} (unknown, decided or expired)", file=err)
                return 1
            if action == "deny":
                store.deny(found)
                audit.record_pairing(
                    "denied", channel=found.channel, sender=found.sender, code=found.code, route=found.route,
                    decided_by=ADMIN,
                )
                print(f"denied {found.code}: {found.channel}:{found.sender}", file=out)
                return 0
            if route_by_id(config, found.route) is None:
                print(f"orchestrator pairing: the route of {found.code} ({found.route}) is no longer in the config", file=err)
                return 1
            store.approve(found, by=ADMIN, now=now)
            audit.record_pairing(
                "approved", channel=found.channel, sender=found.sender, code=found.code, route=found.route,
                decided_by=ADMIN,
            )
            print(f"approved {found.code}: {found.channel}:{found.sender} is admitted by route {found.route}", file=out)
            return 0
        assert action == "revoke" and channel is not None and sender is not None
        removed = store.revoke(channel=channel, sender=sender, route=route)
        for p in removed:
            audit.record_pairing(
                "revoked", channel=p.channel, sender=p.sender, code=p.code, route=p.route, decided_by=ADMIN
            )
            print(f"revoked {p.channel}:{p.sender} from route {p.route}", file=out)
        if not removed:
            print(f"orchestrator pairing: {channel}:{sender} is not paired" + (f" with route {route}" if route else ""), file=err)
            return 1
        return 0


def paired_routes(config: Config, *, channel: str, sender: str) -> frozenset[str]:
    """Return the routes `sender` on `channel` is paired with, as stored (for `orchestrator route`; creates nothing)."""
    path = config.state_path() / "pairing.sqlite3"
    if not pairing_in_use(config, channel) or not path.exists():
        return frozenset()
    with PairingStore(path, alphabet=CODE_ALPHABET, length=CODE_LENGTH, ttl_s=CODE_TTL_S) as store:
        return store.routes_of(channel, sender)
