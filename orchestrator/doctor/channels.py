"""Connect each chat channel once with its token: Telegram getMe, Slack auth.test, Discord /users/@me.

Plain HTTP (aiohttp) rather than the adapters: one call that changes nothing on the
platform, so a check never takes a bot's updates or opens its gateway session.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiohttp

from orchestrator.config import (
    ChannelConfig,
    Config,
    DiscordChannelConfig,
    SlackChannelConfig,
    TelegramChannelConfig,
    resolve_secret,
)
from orchestrator.errors import ConfigProblem, SecretError

__all__ = ["probe_channel"]

TELEGRAM_API: Final = "https://api.telegram.org"
SLACK_API: Final = "https://slack.com/api/"
DISCORD_API: Final = "https://discord.com/api/v10"


class _Refused(Exception):
    """The platform could not be reached or refused the token; the text says which."""


async def probe_channel(
    config: Config, name: str, channel: ChannelConfig, *, shown: str, timeout_s: float
) -> tuple[str | None, list[ConfigProblem]]:
    """Call the platform once as this channel's bot; return a line naming the bot, or the problem."""
    if not isinstance(channel, TelegramChannelConfig | SlackChannelConfig | DiscordChannelConfig):
        return None, []  # the terminal has nothing to connect to
    base = config.source.parent if config.source else None
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            if isinstance(channel, TelegramChannelConfig):
                who = await _telegram(session, channel, resolve_secret(channel.token, base=base))
            elif isinstance(channel, SlackChannelConfig):
                app = resolve_secret(channel.app_token, base=base) if channel.app_token else None
                who = await _slack(session, channel, resolve_secret(channel.bot_token, base=base), app)
            else:
                who = await _discord(session, channel, resolve_secret(channel.token, base=base))
    except SecretError:
        return None, []  # the secrets check names the key
    except _Refused as exc:
        return None, [ConfigProblem(shown, f"channels.{name}", f"{channel.kind}: {exc}")]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        return None, [ConfigProblem(shown, f"channels.{name}", f"{channel.kind}: cannot connect ({reason})")]
    return f"channel {name} ({channel.kind}): connected as {who}", []


async def _telegram(session: aiohttp.ClientSession, channel: TelegramChannelConfig, token: str) -> str:
    api = (channel.api_base_url or TELEGRAM_API).rstrip("/")
    async with session.get(f"{api}/bot{token}/getMe") as response:
        body: dict[str, Any] = await response.json(content_type=None)
    if not body.get("ok"):
        hint = ": check the token (from @BotFather)" if response.status in (401, 404) else ""
        raise _Refused(f"getMe refused the token ({response.status} {body.get('description', '')}){hint}")
    return f"@{body['result'].get('username', '?')}"


async def _slack(
    session: aiohttp.ClientSession, channel: SlackChannelConfig, token: str, app_token: str | None
) -> str:
    api = (channel.api_base_url or SLACK_API).rstrip("/")
    async with session.post(f"{api}/auth.test", headers={"Authorization": f"Bearer {token}"}) as response:
        body: dict[str, Any] = await response.json(content_type=None)
    if not body.get("ok"):
        raise _Refused(f"auth.test refused bot_token ({body.get('error', response.status)}): use the xoxb- token")
    if app_token is not None and channel.mode == "socket":
        # Asks for a Socket Mode URL only; nothing connects to it.
        headers = {"Authorization": f"Bearer {app_token}"}
        async with session.post(f"{api}/apps.connections.open", headers=headers) as response:
            opened: dict[str, Any] = await response.json(content_type=None)
        if not opened.get("ok"):
            raise _Refused(
                f"apps.connections.open refused app_token ({opened.get('error', response.status)}): "
                "use the xapp- token with the connections:write scope"
            )
    return f"{body.get('user', '?')} in {body.get('team', '?')}"


async def _discord(session: aiohttp.ClientSession, channel: DiscordChannelConfig, token: str) -> str:
    api = (channel.api_base_url or DISCORD_API).rstrip("/")
    async with session.get(f"{api}/users/@me", headers={"Authorization": f"Bot {token}"}) as response:
        body: dict[str, Any] = await response.json(content_type=None)
    if response.status != 200:
        raise _Refused(f"/users/@me refused the token ({response.status} {body.get('message', '')})")
    return str(body.get("username", "?"))
