"""The approval codec: the one spelling of an Approve / Deny / Show all button and of `/approve ID` text.

Buttons carry `ap:<request_id>:y`, `ap:<request_id>:n` or `ap:<request_id>:s` (Telegram
`callback_data`, Discord `custom_id`, Slack's button `action_id` and `value`); people type
`/approve ID`, `/deny ID` or `/show ID` (Telegram groups: `/approve@bot ID`). A Show all
press reaches the core as the text `/show ID` from the presser, a chat command like any
other (the daemon decides who may see the call).
Everything parsed here comes from strangers, so a parse returns None for anything but a
well-formed answer with a plausible request id, never raises, and never hands on a huge or
invisible id (the core echoes the id back: "There is no pending approval ...").

One older dialect is still read, never written: Slack Approve / Deny buttons posted before
the codec spelled them carry `action_id` `approve` or `deny` and the bare id as their value
(`from_legacy_slack_button`), so a prompt posted before an upgrade can still be answered.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVAL_COMMANDS",
    "APPROVE_COMMAND",
    "DENY_COMMAND",
    "MAX_REQUEST_ID_CHARS",
    "SHOW_COMMAND",
    "approval_command",
    "encode_approval_button",
    "encode_show_button",
    "from_legacy_slack_button",
    "is_request_id",
    "parse_approval_button",
    "parse_approval_command",
    "parse_show_button",
    "parse_show_command",
    "show_command",
]

APPROVE_COMMAND: Final = "/approve"
DENY_COMMAND: Final = "/deny"
SHOW_COMMAND: Final = "/show"
APPROVAL_COMMANDS: Final = (APPROVE_COMMAND, DENY_COMMAND, SHOW_COMMAND)
# The core's ids are 8 hex digits; anything this long is not one of ours.
MAX_REQUEST_ID_CHARS: Final = 64
_BUTTON_PREFIX: Final = "ap"
_SEPARATOR: Final = ":"
_FLAGS: Final = {"y": True, "n": False}
_SHOW_FLAG: Final = "s"
# The Slack buttons of before the codec: action_id -> approved, the bare request id as value.
_LEGACY_SLACK_ACTIONS: Final = {"approve": True, "deny": False}


def is_request_id(text: str) -> bool:
    """Say whether `text` can be a request id: 1-64 printable characters, no space or `:`."""
    return 0 < len(text) <= MAX_REQUEST_ID_CHARS and text.isprintable() and " " not in text and _SEPARATOR not in text


def encode_approval_button(request_id: str, *, approved: bool) -> str:
    """Return the button payload `ap:<request_id>:y|n`; raises ValueError for an impossible id."""
    if not is_request_id(request_id):
        raise ValueError(f"not a request id: {request_id[:MAX_REQUEST_ID_CHARS]!r}")
    return _SEPARATOR.join((_BUTTON_PREFIX, request_id, "y" if approved else "n"))


def encode_show_button(request_id: str) -> str:
    """Return the Show all button payload `ap:<request_id>:s`; raises ValueError for an impossible id."""
    if not is_request_id(request_id):
        raise ValueError(f"not a request id: {request_id[:MAX_REQUEST_ID_CHARS]!r}")
    return _SEPARATOR.join((_BUTTON_PREFIX, request_id, _SHOW_FLAG))


def parse_approval_button(data: str | None) -> tuple[str, bool] | None:
    """Return (request id, approved) for a button payload `ap:<request_id>:y|n`, else None."""
    parsed = _button(data)
    if parsed is None or parsed[1] not in _FLAGS:
        return None
    return parsed[0], _FLAGS[parsed[1]]


def parse_show_button(data: str | None) -> str | None:
    """Return the request id of a Show all payload `ap:<request_id>:s`, else None."""
    parsed = _button(data)
    return parsed[0] if parsed is not None and parsed[1] == _SHOW_FLAG else None


def from_legacy_slack_button(action_id: object, value: object) -> str | None:
    """Return the payload `ap:<id>:y|n` an older Slack button stands for (`approve`|`deny`, the bare id), else None."""
    approved = _LEGACY_SLACK_ACTIONS.get(action_id) if isinstance(action_id, str) else None
    if approved is None or not isinstance(value, str) or not is_request_id(value):
        return None
    return encode_approval_button(value, approved=approved)


def _button(data: str | None) -> tuple[str, str] | None:
    parts = (data or "").split(_SEPARATOR)
    if len(parts) != 3 or parts[0] != _BUTTON_PREFIX or not is_request_id(parts[1]):
        return None
    return parts[1], parts[2]


def show_command(request_id: str) -> str:
    """Return the text that asks for the whole call of `request_id`: `/show ID`."""
    return f"{SHOW_COMMAND} {request_id}"


def parse_show_command(text: str, *, bot_username: str | None = None) -> str | None:
    """Return the request id of `/show ID` (any case; `/show@thatbot ID` with `bot_username`), else None."""
    parts = text.split()
    if len(parts) != 2 or not is_request_id(parts[1]):
        return None
    command, at, mention = parts[0].lower().partition("@")
    if command != SHOW_COMMAND or (at and (bot_username is None or mention != bot_username.lower())):
        return None
    return parts[1]


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
