"""Who a route admits is policy: its `senders`, the strangers it pairs, and its per-sender message rate.

Resolved here and nowhere else (routing asks, `orchestrator route` and `policy` show, the
parity rows check):

- A route admits the senders it lists (`"*"` anyone) and the senders an approver paired with
  it (the stored approvals, an input read on every message: a revoke holds on the next one).
  A pairing admits through that route only, never another route of the same channel, and
  only while the route still says `strangers = "pair"` (set back to "ignore", its pairings
  are suspended, not deleted).
- `strangers = "pair"`: a sender the route does not admit, writing in a DM, is answered with a
  pairing code (never in a group: a code there would be read by everyone). `"ignore"`, the
  default, answers nobody (omission never grants).
- A code is decided only by someone the route already lists in `approvers`, never by the
  code's own sender (a sender listed as an approver still cannot approve a code of their own).
- `rate_limit`: past `messages` in any `per_s` seconds, a sender's messages in one chat are
  not run; `/stop` and `/new` are never limited.
"""

from __future__ import annotations

import functools
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from orchestrator.config import Config, RouteConfig

__all__ = [
    "ANSWERS_PER_HOUR",
    "ATTEMPTS_PER_HOUR",
    "CODE_ALPHABET",
    "CODE_LENGTH",
    "CODE_TTL_S",
    "MAX_PENDING_PER_CHANNEL",
    "NEVER_LIMITED",
    "PAIRING_COMMAND",
    "RateLimit",
    "RouteAdmission",
    "pairing_in_use",
    "resolve_admission",
    "route_admissions",
    "route_by_id",
    "route_id",
]

PAIRING_COMMAND: Final = "/pairing"
# Crockford's base32 without I, L, O and U (none there to begin with): no 0/O or 1/I/L mix-ups.
CODE_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH: Final = 8
CODE_TTL_S: Final = 3600.0
MAX_PENDING_PER_CHANNEL: Final = 3
# Answers one stranger gets in any hour (the code, or "try later"); past them, silence.
ANSWERS_PER_HOUR: Final = 3
# `/pairing approve|deny` tries one sender may make in any hour with a code that is not theirs to
# decide or not pending (what bounds guessing: docs/security.md#pairing-codes); past them, refused unread.
ATTEMPTS_PER_HOUR: Final = 5
NEVER_LIMITED: Final = frozenset({"/stop", "/new"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """At most `messages` per sender per chat in any `per_s` seconds."""

    messages: int
    per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteAdmission:
    """Whom one route admits and how fast (made by `resolve_admission`)."""

    route_id: str  # what stored pairings name the route by
    senders: frozenset[str]
    strangers: Literal["ignore", "pair"]
    approvers: frozenset[str]
    rate_limit: RateLimit | None

    def admits(self, sender: str, paired: Container[str] = ()) -> bool:
        """Return whether `sender` may talk through this route; `paired` holds the route ids it was paired with."""
        if "*" in self.senders or sender in self.senders:
            return True
        return self.strangers == "pair" and self.route_id in paired  # back to "ignore": pairings suspended

    def pairs(self, sender: str, *, is_direct: bool, paired: Container[str] = ()) -> bool:
        """Return whether a message of `sender` gets a pairing code here (a stranger in a DM, `strangers = "pair"`)."""
        return self.strangers == "pair" and is_direct and not self.admits(sender, paired)

    def may_decide(self, decider: str, *, code_sender: str) -> bool:
        """Return whether `decider` may approve or deny a code `code_sender` was given for this route."""
        return decider in self.approvers and decider != code_sender

    def limits(self, command: str) -> RateLimit | None:
        """Return the rate limit a message starting with `command` counts against (None: never limited)."""
        return None if command in NEVER_LIMITED else self.rate_limit

    def describe(self) -> dict[str, object]:
        """Return the admission as plain data (for `orchestrator route --json` and `policy`)."""
        return {
            "route_id": self.route_id,
            "strangers": self.strangers,
            "rate_limit": None if self.rate_limit is None else {
                "messages": self.rate_limit.messages, "per_s": self.rate_limit.per_s,
            },
        }


def route_id(route: RouteConfig) -> str:
    """Return the name stored pairings give `route`: its channel, chat pattern and agent."""
    return f"{route.channel}|{route.chat}|{route.agent}"


@functools.lru_cache(maxsize=1024)
def resolve_admission(route: RouteConfig) -> RouteAdmission:
    """Resolve whom `route` admits and its rate limit; a missing `strangers` pairs nobody."""
    limit = route.rate_limit
    return RouteAdmission(
        route_id=route_id(route),
        senders=frozenset(route.senders),
        strangers=route.strangers,
        approvers=frozenset(route.approvers),
        rate_limit=None if limit is None else RateLimit(messages=limit.messages, per_s=limit.per_s),
    )


def pairing_in_use(config: Config, channel: str) -> bool:
    """Return whether any route of `channel` pairs strangers (only then are stored pairings read)."""
    return any(route.channel == channel and route.strangers == "pair" for route in config.routes)


def route_by_id(config: Config, wanted: str) -> RouteConfig | None:
    """Return the first route stored pairings call `wanted`, None when the config no longer has it."""
    return next((route for route in config.routes if route_id(route) == wanted), None)


def route_admissions(config: Config, agent: str) -> dict[str, dict[str, object]]:
    """Return the routes to `agent` that pair strangers or limit the rate, by `routes[i]` (for `orchestrator policy`)."""
    resolved = ((index, resolve_admission(route)) for index, route in enumerate(config.routes) if route.agent == agent)
    return {
        f"routes[{index}]": admission.describe()
        for index, admission in resolved
        if admission.strangers != "ignore" or admission.rate_limit is not None
    }
