"""Translate Slack payloads to core values, and approval prompts to Block Kit.

Pure functions over the raw JSON Slack sends (Events API `event_callback` bodies and
`block_actions` interaction payloads); no SDK import, so the rules are readable in one place:

- `message` events in DMs (`channel_type == "im"`) are direct messages. In channels
  (`message.channels`, `message.groups`, `message.mpim`) a `message` that mentions the bot is
  dropped, because its `app_mention` carries it (so a mention is never handled twice); every
  other one is delivered with its group facts (`reply_to_bot` when it is in a thread the bot
  started: `parent_user_id`), and the core's route gate decides. An `app_mention` in a DM is
  dropped for the same reason (the `message` covers it).
- Bot messages (`bot_id`, `bot_profile`, subtype `bot_message`, or our own user id) are ignored.
- Subtypes other than `file_share`, `thread_broadcast` and `me_message` (all typed by a person)
  are ignored: `message_changed` (edits), `message_deleted`, `channel_join`, `channel_topic`, ...
- Files on the event become `Inbound.attachments` (`slack_files.py`); a file with no text is
  still a message.
- Every mention of the bot is cut from the text; a leading `/word` is a command to the bot; and `/approve ID` / `/deny ID` become
  `ApprovalAnswer`s. (Slack's composer treats a leading `/` as a slash command; users type
  ` /approve ID` with a space, or `@bot /approve ID`, or simply press the buttons.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from channels.approval_codec import (
    approval_command,
    encode_approval_button,
    encode_show_button,
    from_legacy_slack_button,
    parse_approval_button,
    parse_approval_command,
    parse_show_button,
    show_command,
)
from channels.base import ApprovalAnswer, ApprovalPrompt, Inbound, fit_arguments
from channels.slack_files import attachments_from_event

__all__ = [
    "ApprovalMessage",
    "approval_message",
    "escape",
    "from_block_actions",
    "from_event",
]

_USER_SUBTYPES: Final = frozenset({"file_share", "thread_broadcast", "me_message"})
_USER_ID: Final = re.compile(r"[UW][A-Z0-9]{2,}")
# `@otherbot /cmd`: a command addressed to someone else (Slack has no `/cmd@bot`)
_OTHERS_COMMAND: Final = re.compile(r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>\s*/\w")
# Block Kit: a section's text holds at most 3,000 characters; the arguments get what the
# headline leaves, measured after escaping.
_SECTION_LIMIT: Final = 3000
_NAME_CHARS: Final = 200


class ApprovalMessage(TypedDict):
    """The chat.postMessage arguments of an approval prompt (besides channel and thread)."""

    text: str
    blocks: list[dict[str, Any]]


def escape(text: str) -> str:
    """Escape the three characters Slack reserves for mentions and links (`&`, `<`, `>`).

    Agent output is shown literally: a model cannot ping `<!channel>` or forge a link.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _str(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _map(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, Mapping) else {}


def from_event(channel: str, body: Mapping[str, Any], *, bot_user_id: str | None) -> Inbound | ApprovalAnswer | None:
    """Return what an `event_callback` body means for the core, or None when it is not for us."""
    event = _map(body, "event")
    kind = event.get("type")
    chat, sender, event_id, ts = _str(event, "channel"), _str(event, "user"), _str(body, "event_id"), _str(event, "ts")
    if chat is None or sender is None or event_id is None or ts is None:
        return None
    mention = _mention(bot_user_id)
    direct = kind == "message" and event.get("channel_type") == "im"
    if kind == "message":
        if not direct and mention is not None and mention.search(event.get("text") or ""):
            return None  # its app_mention carries it
    elif kind != "app_mention" or chat.startswith("D"):
        return None
    subtype = event.get("subtype")
    if subtype is not None and subtype not in _USER_SUBTYPES:
        return None
    if event.get("bot_id") or event.get("bot_profile") or sender == bot_user_id:
        return None
    raw = event.get("text") or ""
    text = _unescape(_cut_mentions(raw, mention))
    command = parse_approval_command(text)
    if command is not None:
        request_id, approved = command
        return ApprovalAnswer(channel=channel, request_id=request_id, sender=sender, approved=approved, chat=chat)
    profile = _map(event, "user_profile")
    return Inbound(
        channel=channel,
        chat=chat,
        sender=sender,
        text=text,
        event_id=event_id,
        message_id=ts,
        thread=_str(event, "thread_ts"),
        sender_name=_str(profile, "display_name") or _str(profile, "real_name"),
        is_direct=direct,
        attachments=attachments_from_event(event),
        mentions_bot=kind == "app_mention",
        reply_to_bot=bot_user_id is not None and event.get("parent_user_id") == bot_user_id,
        command_target="bot" if text.startswith("/") else "other" if _OTHERS_COMMAND.match(text) else None,
    )


def _mention(bot_user_id: str | None) -> re.Pattern[str] | None:
    return re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>[:,]?") if bot_user_id else None


def _cut_mentions(text: str, mention: re.Pattern[str] | None) -> str:
    if mention is None:
        return text
    return re.sub(r"(?<=\S)  +(?=\S)", " ", mention.sub("", text)).strip()


def from_block_actions(channel: str, payload: Mapping[str, Any]) -> ApprovalAnswer | Inbound | None:
    """Return the approval answer a `block_actions` payload carries (Show all: the presser's
    `/show ID` as a message), or None for other buttons."""
    if payload.get("type") != "block_actions":
        return None
    sender = _str(_map(payload, "user"), "id")
    chat = _str(_map(payload, "channel"), "id") or _str(_map(payload, "container"), "channel_id")
    actions = payload.get("actions")
    if sender is None or not isinstance(actions, list):
        return None
    for action in actions:
        if not isinstance(action, Mapping):
            continue
        # the codec's payload is the button's value (and its action_id); an older prompt's
        # Approve / Deny carried the bare id, read through the codec too (its id checked)
        value = _str(action, "value")
        data = from_legacy_slack_button(action.get("action_id"), value) or value
        shown = parse_show_button(data)
        if shown is not None and chat is not None:
            message, container = _map(payload, "message"), _map(payload, "container")
            return Inbound(
                channel=channel, chat=chat, sender=sender, text=show_command(shown),
                event_id=f"show-{_str(payload, 'trigger_id') or _str(action, 'action_ts')}",
                thread=_str(message, "thread_ts") or _str(container, "thread_ts"), is_direct=chat.startswith("D"),
                command_target="bot",  # a press on the bot's own prompt is addressed to it
            )
        answer = parse_approval_button(data)
        if answer is not None:
            return ApprovalAnswer(channel=channel, request_id=answer[0], sender=sender, approved=answer[1], chat=chat)
    return None


def approval_message(prompt: ApprovalPrompt) -> ApprovalMessage:
    """Build the prompt: tool and argument preview, Approve / Deny buttons, the text fallback."""
    tool = escape(prompt.tool[:_NAME_CHARS])
    who = prompt.requester
    requester = f"<@{who}>" if _USER_ID.fullmatch(who) else escape(who[:_NAME_CHARS])
    head = f"*Approval needed:* `{tool}` requested by {requester}\n"
    room = _SECTION_LIMIT - len(head) - 6
    shown = fit_arguments(prompt.arguments, room, size=lambda text: len(_in_code_block(text)))
    section = head + "```" + _in_code_block(shown) + "```"
    cut = shown != prompt.arguments.whole
    ident = escape(prompt.request_id)
    approve, deny = (escape(approval_command(prompt.request_id, approved=flag)) for flag in (True, False))
    hint = (
        f"Or reply `{approve}` or `{deny}`. "
        f"No answer within {_duration(prompt.timeout_s)} counts as deny."
        + (f" The arguments are cut: press Show all or reply `{escape(show_command(prompt.request_id))}`." if cut else "")
    )
    buttons = [
        _button("Approve", encode_approval_button(prompt.request_id, approved=True), style="primary"),
        _button("Deny", encode_approval_button(prompt.request_id, approved=False), style="danger"),
    ]
    if cut:
        buttons.append(_button("Show all", encode_show_button(prompt.request_id), style=None))
    return ApprovalMessage(
        text=f"Approval needed: {tool} (request {ident}). Reply {approve} or {deny}.",
        blocks=[
            {"type": "section", "text": {"type": "mrkdwn", "text": section}},
            {"type": "actions", "block_id": f"approval:{prompt.request_id}"[:255], "elements": buttons},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]},
        ],
    )


def _in_code_block(raw: str) -> str:
    """Return `raw` escaped for a code block (a fence inside it would end the block early)."""
    return escape(raw).replace("``", "`\u200b`")  # no run of three backticks survives, however long


def _button(label: str, payload: str, *, style: str | None) -> dict[str, Any]:
    # The codec's payload is both the action_id (unique within the block, as Slack requires)
    # and the value the press sends back.
    button: dict[str, Any] = {"type": "button", "action_id": payload, "text": {"type": "plain_text", "text": label}}
    if style is not None:  # Slack refuses a style other than primary or danger
        button["style"] = style
    return button | {"value": payload}


def _duration(seconds: float) -> str:
    whole = max(1, round(seconds))
    if whole % 60 == 0:
        return f"{whole // 60} min"
    return f"{whole} s"
