"""Local shape checks: ids and tokens that no platform could accept, found before any network call.

A Telegram or Discord sender is a number, a Slack one a member id (`U...`/`W...`); a
Telegram token is `<bot id>:<35 characters>`, Slack's are `xoxb-` (bot) and `xapp-` (app).
`orchestrator check`, the doctor and `orchestrator init` all judge an id or token here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from orchestrator.config import (
    Config,
    DiscordChannelConfig,
    SecretRef,
    SlackChannelConfig,
    TelegramChannelConfig,
    resolve_secret,
)
from orchestrator.errors import ConfigProblem, SecretError

__all__ = ["sender_problem", "shape_problems", "token_shape_problem"]

_NUMERIC: Final = re.compile(r"[0-9]{1,20}")
_SLACK_MEMBER: Final = re.compile(r"[UW][A-Z0-9]{2,20}")
# BotFather's tokens: the bot's numeric id, a colon, 35 characters of base64url (the Bot API
# page's own example, `110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw`, has 34: taken too).
_TELEGRAM_TOKEN: Final = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{34,35}")
_FIND_ID: Final = {
    "telegram": (
        "Telegram senders are numeric user ids (like 123456789): `orchestrator run` logs "
        "`no route ... sender ID` for each message it refuses, and @userinfobot in Telegram tells you yours"
    ),
    "discord": (
        "Discord senders are numeric user ids (a long number): Settings -> Advanced -> Developer Mode on, "
        "then right-click the name -> Copy User ID"
    ),
    "slack": (
        "Slack senders are member ids (U0123ABCDEF or W0123ABCDEF): the profile's ... menu -> Copy member ID"
    ),
}


def sender_problem(kind: str, sender: str) -> str | None:
    """Return why `sender` can never be a `kind` platform's user id (None when it can, or for `*`)."""
    if sender == "*" or kind not in _FIND_ID:
        return None
    shape = _SLACK_MEMBER if kind == "slack" else _NUMERIC
    if shape.fullmatch(sender):
        return None
    return f"{sender!r} is not a user id: {_FIND_ID[kind]}"


def token_shape_problem(kind: str, key: str, token: str) -> str | None:
    """Return why `token` (the `key` of a `kind` channel) has a shape its platform never issues, or None.

    Never shows the token; a pasted `bot` or `Bot ` prefix is named as what it is.
    """
    if kind == "telegram":
        if _TELEGRAM_TOKEN.fullmatch(token):
            return None
        if token.lower().startswith("bot") and _TELEGRAM_TOKEN.fullmatch(token[3:]):
            return (
                "the token starts with 'bot': that is part of the API URL (https://api.telegram.org/bot<token>/), "
                "not of the token; remove it"
            )
        return (
            f"a Telegram bot token is the bot id, ':' and 35 characters (like 123456789:AAF...), this one has "
            f"{_telegram_found(token)}: copy it again from @BotFather (/mybots -> the bot -> API Token)"
        )
    if kind == "slack":
        want = "xapp-" if key == "app_token" else "xoxb-"
        if token.startswith(want):
            return None
        got = token[:5] if token[:5] in ("xoxb-", "xapp-", "xoxp-") else None
        what = f"starts with {got!r}" if got else f"does not start with {want!r}"
        which = "the app-level token (Basic Information -> App-Level Tokens)" if want == "xapp-" else (
            "the Bot User OAuth Token (OAuth & Permissions)"
        )
        return f"this token {what}: {key} is {which}, which starts with {want!r}"
    if kind == "discord":
        if token.lower().startswith("bot "):
            return "the token starts with 'Bot ': that is the Authorization header's scheme, not the token; remove it"
        if any(c.isspace() for c in token):
            return "the token holds a space: copy it again (Developer Portal -> your application -> Bot -> Reset Token)"
    return None


def _telegram_found(token: str) -> str:
    bot_id, colon, rest = token.partition(":")
    if not colon:
        return "no ':'"
    if not bot_id.isdigit():
        return "no numeric bot id before ':'"
    if len(rest) not in (34, 35):
        return f"{len(rest)} characters after ':'"
    return "characters other than A-Z, a-z, 0-9, '_' and '-' after ':'"


def shape_problems(config: Config, *, shown: str) -> Iterator[ConfigProblem]:
    """Yield a problem per route sender or approver, and per channel token that resolves here, of the wrong shape.

    A token that does not resolve here (an unset variable) is not judged: the doctor's
    secrets check names it.
    """
    for i, route in enumerate(config.routes):
        channel = config.channels.get(route.channel)
        if channel is None:
            continue
        for key, ids in (("senders", route.senders), ("approvers", route.approvers)):
            for j, sender in enumerate(ids):
                problem = sender_problem(channel.kind, sender)
                if problem:
                    yield ConfigProblem(shown, f"routes[{i}].{key}[{j}]", problem)
    base = config.source.parent if config.source else None
    for name, channel in config.channels.items():
        refs: tuple[tuple[str, SecretRef | None], ...] = ()
        if isinstance(channel, TelegramChannelConfig | DiscordChannelConfig):
            refs = (("token", channel.token),)
        elif isinstance(channel, SlackChannelConfig):
            refs = (("bot_token", channel.bot_token), ("app_token", channel.app_token if channel.mode == "socket" else None))
        for key, ref in refs:
            if ref is None:
                continue
            try:
                token = resolve_secret(ref, base=base)
            except SecretError:
                continue
            problem = token_shape_problem(channel.kind, key, token)
            if problem:
                yield ConfigProblem(shown, f"channels.{name}.{key}", problem)
