"""Discord API v10 JSON objects, complete enough for discord.py to parse, for the fake Discord."""

from __future__ import annotations

import itertools
import secrets
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "application",
    "bot_message",
    "component_interaction",
    "custom_ids",
    "guild",
    "snowflake",
    "text_channel",
    "thread",
    "user",
    "user_message",
]

_snowflakes = itertools.count(1_300_000_000_000_000_001)
_MEMBER_BASE: dict[str, Any] = {"roles": [], "deaf": False, "mute": False, "flags": 0}


def snowflake() -> str:
    """Return a fresh, increasing id."""
    return str(next(_snowflakes))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def user(user_id: str, *, username: str | None = None, bot: bool = False) -> dict[str, Any]:
    """A user object."""
    return {
        "id": user_id,
        "username": username or f"user{user_id[-4:]}",
        "discriminator": "0",
        "global_name": None,
        "avatar": None,
        "bot": bot,
    }


def application(app_id: str, name: str, *, flags: int = 1 << 19) -> dict[str, Any]:
    """GET /applications/@me (and /oauth2/applications/@me): `flags` as the Developer Portal set them."""
    return {
        "id": app_id,
        "name": name,
        "icon": None,
        "description": "",
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": user("1", username="owner"),
        "verify_key": "0" * 64,
        "flags": flags,  # 1 << 19 = GATEWAY_MESSAGE_CONTENT_LIMITED
        "team": None,
    }


def text_channel(cid: str, gid: str) -> dict[str, Any]:
    """A guild text channel (type 0)."""
    return {
        "id": cid, "type": 0, "guild_id": gid, "name": f"chan-{cid[-4:]}", "position": 0,
        "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None,
        "rate_limit_per_user": 0, "last_message_id": None, "flags": 0,
    }


def thread(tid: str, parent: str, gid: str) -> dict[str, Any]:
    """A public thread (type 11) under `parent`."""
    return {
        "id": tid, "type": 11, "guild_id": gid, "parent_id": parent, "owner_id": "1",
        "name": f"thread-{tid[-4:]}", "message_count": 0, "member_count": 1,
        "rate_limit_per_user": 0, "flags": 0, "last_message_id": None,
        "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                            "archive_timestamp": _now(), "locked": False},
    }


def guild(gid: str, channels: list[dict[str, Any]], threads: list[dict[str, Any]]) -> dict[str, Any]:
    """A GUILD_CREATE payload."""
    everyone = {"id": gid, "name": "@everyone", "permissions": "0", "position": 0, "color": 0,
                "hoist": False, "managed": False, "mentionable": False, "flags": 0}
    return {
        "id": gid, "name": f"guild {gid}", "icon": None, "owner_id": "1", "features": [],
        "roles": [everyone], "emojis": [], "stickers": [], "member_count": 2, "large": False,
        "unavailable": False, "joined_at": _now(), "channels": channels, "threads": threads,
        "members": [], "voice_states": [], "presences": [], "stage_instances": [],
        "guild_scheduled_events": [], "soundboard_sounds": [], "preferred_locale": "en-US",
    }


def _message(mid: str, channel_id: str, author: dict[str, Any], content: str) -> dict[str, Any]:
    return {
        "id": mid, "type": 0, "channel_id": channel_id, "author": author, "content": content,
        "timestamp": _now(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
        "mentions": [], "mention_roles": [], "attachments": [], "embeds": [], "components": [],
        "pinned": False, "flags": 0,
    }


def user_message(
    mid: str, channel_id: str, author: dict[str, Any], content: str, *,
    guild_id: str | None, mentions: list[dict[str, Any]],
) -> dict[str, Any]:
    """A MESSAGE_CREATE payload from a user (in a guild when `guild_id` is given)."""
    message = _message(mid, channel_id, author, content) | {"mentions": mentions}
    if guild_id is not None:
        message |= {"guild_id": guild_id, "member": _MEMBER_BASE | {"joined_at": _now()}}
    return message


def bot_message(
    channel_id: str, bot: dict[str, Any], body: dict[str, Any], *, guild_id: str | None
) -> dict[str, Any]:
    """The message object answering POST /channels/{id}/messages with `body`."""
    message = _message(snowflake(), channel_id, bot, body.get("content") or "")
    message |= {"components": body.get("components") or [], "flags": body.get("flags") or 0}
    if body.get("message_reference"):
        message |= {"type": 19, "message_reference": body["message_reference"]}
    if guild_id is not None:
        message["guild_id"] = guild_id
    return message


def component_interaction(
    *, app_id: str, custom_id: str, clicker: dict[str, Any], channel: dict[str, Any],
    guild_id: str | None, message: dict[str, Any] | None,
) -> dict[str, Any]:
    """An INTERACTION_CREATE payload for a button press (type 3, component type 2)."""
    payload: dict[str, Any] = {
        "id": snowflake(), "application_id": app_id, "type": 3,
        "data": {"custom_id": custom_id, "component_type": 2},
        "channel_id": channel["id"], "channel": channel,
        "token": "itoken-" + secrets.token_hex(8), "version": 1, "app_permissions": "0",
        "locale": "en-US", "entitlements": [], "attachment_size_limit": 8_388_608,
        "authorizing_integration_owners": {"0": guild_id or clicker["id"]},
        "context": 0 if guild_id is not None else 1,
    }
    if message is not None:
        payload["message"] = message
    if guild_id is None:
        payload["user"] = clicker
    else:
        payload |= {
            "guild_id": guild_id,
            "guild": {"id": guild_id, "locale": "en-US", "features": []},
            "guild_locale": "en-US",
            "member": _MEMBER_BASE | {"user": clicker, "joined_at": _now(), "permissions": "0"},
        }
    return payload


def custom_ids(message: dict[str, Any]) -> list[str]:
    """Return every component custom_id in a message (action rows nest components)."""
    found: list[str] = []
    stack: list[Any] = list(message.get("components") or [])
    while stack:
        component = stack.pop()
        if isinstance(component, dict):
            if "custom_id" in component:
                found.append(component["custom_id"])
            stack.extend(component.get("components") or [])
    return found
