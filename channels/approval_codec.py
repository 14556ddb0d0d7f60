"""The approval codec: the one spelling of an Approve / Deny button and of `/approve ID` text.

Buttons carry `ap:<request_id>:y` or `ap:<request_id>:n` (Telegram `callback_data`, Discord
`custom_id`); people type `/approve ID` or `/deny ID` (Telegram groups: `/approve@bot ID`).
Everything parsed here comes from strangers, so a parse returns None for anything but a
well-formed answer with a plausible request id, never raises, and never hands on a huge or
invisible id (the core echoes the id back: "There is no pending approval ...").
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVAL_COMMANDS",
    "APPROVE_COMMAND",
    "DENY_COMMAND",
    "MAX_REQUEST_ID_CHARS",
    "approval_command",
    "encode_approval_button",
    "is_request_id",
    "parse_approval_button",
    "parse_approval_command",
]

APPROVE_COMMAND: Final = "/approve"
DENY_COMMAND: Final = "/deny"
APPROVAL_COMMANDS: Final = (APPROVE_COMMAND, DENY_COMMAND)
# The core's ids are 8 hex digits; anything this long is not one of ours.
MAX_REQUEST_ID_CHARS: Final = 64
_BUTTON_PREFIX: Final = "ap"
_SEPARATOR: Final = ":"
_FLAGS: Final = {"y": True, "n": False}


def is_request_id(text: str) -> bool:
    """Say whether `text` can be a request id: 1-64 printable characters, no space or `:`."""
    return 0 < len(text) <= MAX_REQUEST_ID_CHARS and text.isprintable() and " " not in text and _SEPARATOR not in text


def encode_approval_button(request_id: str, *, approved: bool) -> str:
    """Return the button payload `ap:<request_id>:y|n`; raises ValueError for an impossible id."""
    if not is_request_id(request_id):
        raise ValueError(f"not a request id: {request_id[:MAX_REQUEST_ID_CHARS]!r}")
    return _SEPARATOR.join((_BUTTON_PREFIX, request_id, "y" if approved else "n"))


def parse_approval_button(data: str | None) -> tuple[str, bool] | None:
    """Return (request id, approved) for a button payload `ap:<request_id>:y|n`, else None."""
    parts = (data or "").split(_SEPARATOR)
    if len(parts) != 3 or parts[0] != _BUTTON_PREFIX or parts[2] not in _FLAGS or not is_request_id(parts[1]):
        return None
    return parts[1], _FLAGS[parts[2]]


def approval_command(request_id: str, *, approved: bool) -> str:
    """Return the text that answers `request_id`: `/approve ID` or `/deny ID`."""
    return f"{APPROVE_COMMAND if approved else DENY_COMMAND} {request_id}"


def parse_approval_command(text: str, *, bot_username: str | None = None) -> tuple[str, bool] | None:
    """Return (request id, approved) for `/approve ID` or `/deny ID` (any case), else None.

    With `bot_username` (Telegram), `/approve@thatbot ID` counts too; a command addressed to
    another bot (or, without `bot_username`, to any bot) is not an answer.
    """
    parts = text.split()
    if len(parts) != 2 or not is_request_id(parts[1]):
        return None
    command, at, mention = parts[0].lower().partition("@")
    if at and (bot_username is None or mention != bot_username.lower()):
        return None
    if command == APPROVE_COMMAND:
        return parts[1], True
    if command == DENY_COMMAND:
        return parts[1], False
    return None
