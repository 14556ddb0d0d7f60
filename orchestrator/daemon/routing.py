"""Routing: which `[[routes]]` entry (and so which agent) answers a message; deny by default."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache

from orchestrator.config import Config, RouteConfig
from orchestrator.errors import ConfigProblem
from orchestrator.seam import ChatCommands, resolve_admission, resolve_chat_commands, resolve_group_gate

__all__ = [
    "RouteMatch", "explain_route", "match_route", "session_key", "shadow_lines", "shadow_problems",
    "shadowed_routes", "stranger_route",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteMatch:
    """The route a message took and its index in `[[routes]]`."""

    index: int
    route: RouteConfig


def match_route(
    config: Config, *, channel: str, chat: str, sender: str, paired: Collection[str] = ()
) -> RouteMatch | None:
    """Return the first route whose channel, chat and admitted senders all match, else None.

    A route with no `senders` admits nobody; `"*"` admits anyone; `paired` names the routes
    an approver paired the sender with (the stored approvals: the seam decides what they admit).
    """
    for index, route in enumerate(config.routes):
        if _why_not(route, channel=channel, chat=chat, sender=sender, paired=paired) is None:
            return RouteMatch(index=index, route=route)
    return None


def stranger_route(
    config: Config, *, channel: str, chat: str, sender: str, is_direct: bool, paired: Collection[str] = ()
) -> RouteMatch | None:
    """Return the first route of this chat that answers `sender` (admitted by none) with a pairing code, else None."""
    for index, route in enumerate(config.routes):
        if route.channel == channel and fnmatchcase(chat, route.chat) and resolve_admission(route).pairs(
            sender, is_direct=is_direct, paired=paired
        ):
            return RouteMatch(index=index, route=route)
    return None


def explain_route(
    config: Config, *, channel: str, chat: str, sender: str, paired: Collection[str] = ()
) -> list[str]:
    """Return one line per route considered, ending with the decision.

    A match is followed by the chat commands and SOPs the route grants that sender, who
    answers the approvals of each SOP's step agents, and whom it admits and how fast;
    last, one line per shadowed route.
    """
    lines: list[str] = []
    for index, route in enumerate(config.routes):
        why = _why_not(route, channel=channel, chat=chat, sender=sender, paired=paired)
        if why is None:
            commands = resolve_chat_commands(config, route)
            lines.append(
                f"routes[{index}]: matches -> agent {route.agent!r}, session {route.session}"
                + (f", approvers {sorted(commands.approvers)}" if commands.approvers else "")
            )
            lines.append(resolve_group_gate(config, route).explain())
            lines.extend(_explain_commands(commands, sender))
            lines.extend(_explain_admission(route, sender, paired))
            return lines + shadow_lines(config)
        lines.append(f"routes[{index}]: skipped ({why})")
    stranger = stranger_route(config, channel=channel, chat=chat, sender=sender, is_direct=True, paired=paired)
    if stranger is not None:
        lines.append(
            f"no route admits the sender: in a DM, routes[{stranger.index}] (strangers = \"pair\") answers with a "
            "pairing code its approvers may approve; elsewhere the message would be ignored and logged"
        )
        return lines + shadow_lines(config)
    lines.append("no route matches: the message would be ignored and logged")
    return lines + shadow_lines(config)


def shadow_lines(config: Config) -> list[str]:
    """Return one line per shadowed route: `routes[2]: shadowed by routes[0], so it never matches`."""
    return [
        f"routes[{later}]: shadowed by {', '.join(f'routes[{i}]' for i in earlier)}, so it never matches"
        for later, earlier in shadowed_routes(config).items()
    ]


def shadow_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem per shadowed route, naming it and the earlier routes that take its messages."""
    problems = []
    for later, earlier in shadowed_routes(config).items():
        route = config.routes[later]
        takers = " and ".join(f"routes[{i}]" for i in earlier)
        problems.append(ConfigProblem(
            shown, f"routes[{later}]",
            f"route shadowed by an earlier one: {takers} {'match' if len(earlier) > 1 else 'matches'} every "
            f"message this route could (channel {route.channel!r}, chat {route.chat!r}, senders "
            f"{', '.join(route.senders)}) and the first match wins, so routes[{later}] never matches: move it "
            f"above routes[{earlier[0]}], narrow the earlier route's chat or senders, or remove it",
        ))
    return problems


def shadowed_routes(config: Config) -> Mapping[int, tuple[int, ...]]:
    """Return each route no message can reach, with the earlier routes that take all its messages.

    The rules are `match_route`'s: a later route is shadowed when, for each sender it admits,
    one earlier route on the same channel admits that sender (or `"*"`) in every chat the
    later route's `chat` glob matches. Never calls a reachable route shadowed; two earlier
    globs that only together cover a later one are not combined. A route admitting nobody
    (no `senders`) is reported as such elsewhere, not here.
    """
    found: dict[int, tuple[int, ...]] = {}
    for later, route in enumerate(config.routes):
        if not route.senders or resolve_admission(route).strangers == "pair":  # it also admits whom it paired
            continue
        covering = [
            (earlier, config.routes[earlier]) for earlier in range(later)
            if config.routes[earlier].channel == route.channel
            and _glob_covers(config.routes[earlier].chat, route.chat)
        ]
        takers: dict[int, None] = {}
        for sender in ("*",) if "*" in route.senders else route.senders:
            taker = next(
                (i for i, r in covering if "*" in r.senders or (sender != "*" and sender in r.senders)), None
            )
            if taker is None:
                break
            takers[taker] = None
        else:
            found[later] = tuple(sorted(takers))
    return found


def _glob_covers(wide: str, narrow: str) -> bool:
    """Return whether every chat id `narrow` matches, `wide` matches too (fnmatch globs, sound)."""
    return wide == narrow or wide == "*" or _covers(_tokens(wide), _tokens(narrow))


_STAR = "*"


@cache
def _tokens(glob: str) -> tuple[str, ...]:
    """Split a glob into `*`, `?`, `[...]` classes and single literal characters."""
    tokens: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "[":
            end = i + 1
            if end < len(glob) and glob[end] == "!":
                end += 1
            if end < len(glob) and glob[end] == "]":
                end += 1
            end = glob.find("]", end)
            if end != -1:  # fnmatch: a `[` with no closing `]` is a literal
                tokens.append(glob[i : end + 1])
                i = end + 1
                continue
        tokens.append("[[]" if char == "[" else char)
        i += 1
    return tuple(tokens)


def _covers(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    @cache
    def covers(w: int, n: int) -> bool:
        if n == len(narrow):
            return all(t == _STAR for t in wide[w:])
        if w == len(wide):
            return False
        if wide[w] == _STAR:  # it matches nothing more, or also what narrow[n] matches
            return covers(w + 1, n) or covers(w, n + 1)
        if narrow[n] == _STAR:
            return False  # any string at all, which one character cannot cover
        return _char_covers(wide[w], narrow[n]) and covers(w + 1, n + 1)

    return covers(0, 0)


def _char_covers(wide: str, narrow: str) -> bool:
    """Return whether the one-character token `wide` matches every character `narrow` does."""
    if wide == "?" or wide == narrow:
        return True
    if narrow == "?":
        return False
    if not narrow.startswith("[") or narrow == "[[]":
        return fnmatchcase(narrow if narrow != "[[]" else "[", wide)
    if narrow.startswith("[!"):
        return False  # a negated class matches almost anything: only `?` (above) covers it
    chars = _class_chars(narrow)
    return chars is not None and all(fnmatchcase(c, wide) for c in chars)


def _class_chars(token: str) -> frozenset[str] | None:
    """Return the characters a positive `[...]` class matches, None when there are too many to list."""
    body, i = token[1:-1], 0
    chars: set[str] = set()
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = ord(body[i]), ord(body[i + 2])
            if high - low > 256:
                return None
            chars.update(chr(c) for c in range(low, high + 1))
            i += 3
        else:
            chars.add(body[i])
            i += 1
    return frozenset(chars)


def session_key(route: RouteConfig, *, channel: str, chat: str, sender: str, thread: str | None) -> str:
    """Return the session key: per chat (and thread), or per sender within it."""
    base = f"{channel}:{chat}" + (f":{thread}" if thread else "")
    return base if route.session == "per_chat" else f"{base}:{sender}"


def _why_not(route: RouteConfig, *, channel: str, chat: str, sender: str, paired: Collection[str]) -> str | None:
    if route.channel != channel:
        return f"channel is {route.channel!r}"
    if not fnmatchcase(chat, route.chat):
        return f"chat {chat!r} does not match {route.chat!r}"
    if not resolve_admission(route).admits(sender, paired):
        return f"sender {sender!r} is not in its senders list" + (" nor paired with it" if paired else "")
    return None


def _explain_admission(route: RouteConfig, sender: str, paired: Collection[str]) -> list[str]:
    # Only what differs from the default (no pairing, no limit), so a plain route reads as before.
    admission, lines = resolve_admission(route), []
    if admission.strangers == "pair":
        how = "listed" if "*" in admission.senders or sender in admission.senders else "paired by an approver"
        lines.append(f"  sender: {how}; strangers: pair (codes decided by {sorted(admission.approvers)} or an admin)")
    if (limit := admission.rate_limit) is not None:
        lines.append(
            f"  rate_limit: {limit.messages} messages per {limit.per_s:g} s per sender per chat (/stop, /new never limited)"
        )
    return lines


def _explain_commands(commands: ChatCommands, sender: str) -> list[str]:
    lines = [f"  commands: {' '.join(commands.commands)}"]
    if not commands.sops:
        lines.append("  sops: none (`/sop NAME` is answered \"not available here\")")
    for name, agents in commands.sop_agents.items():
        who = [
            f"{agent} by {sorted(answerers)}" if answerers else f"{agent} by nobody (the route has no approvers: denied)"
            for agent, answerers in ((a, commands.answerers(a, sender)) for a in agents)
        ]
        lines.append(f"  sop {name}: steps run as {', '.join(agents)}; approvals: {'; '.join(who)}")
    return lines
