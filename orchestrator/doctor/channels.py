"""Connect each chat channel once with its token: Telegram getMe, Slack auth.test, Discord /users/@me.

Plain HTTP (aiohttp) rather than the adapters: one call that changes nothing on the
platform, so a check never takes a bot's updates or opens its gateway session. Discord is
also asked for its application's flags (`/applications/@me`): the Message Content intent
shows there, and without it the gateway would refuse the bot (close 4014) at start.

The platform calls (`telegram_bot`, `slack_identity`, `discord_bot`) are public so that
`orchestrator init` checks a token exactly as the doctor will.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiohttp

from orchestrator.checks import shape_problems
from orchestrator.config import (
    ChannelConfig,
    Config,
    DiscordChannelConfig,
    SlackChannelConfig,
    TelegramChannelConfig,
    resolve_secret,
)
from orchestrator.doctor.refused import ProbeRefused
from orchestrator.errors import ConfigProblem, SecretError

__all__ = [
    "DISCORD_API",
    "MESSAGE_CONTENT_HINT",
    "SLACK_API",
    "TELEGRAM_API",
    "discord_bot",
    "probe_channel",
    "slack_identity",
    "telegram_bot",
]

TELEGRAM_API: Final = "https://api.telegram.org"
SLACK_API: Final = "https://slack.com/api/"
DISCORD_API: Final = "https://discord.com/api/v10"
# Application flags (Discord API reference, "Application Flags"): the privileged intent granted,
# for a verified app or (LIMITED) one in fewer than 100 servers.
_GATEWAY_MESSAGE_CONTENT: Final = 1 << 18
_GATEWAY_MESSAGE_CONTENT_LIMITED: Final = 1 << 19
MESSAGE_CONTENT_HINT: Final = (
    "the Message Content intent is off, so the gateway would refuse the bot (close 4014): enable it under "
    "Developer Portal -> your application -> Bot -> Privileged Gateway Intents -> Message Content Intent"
)


async def probe_channel(
    config: Config, name: str, channel: ChannelConfig, *, shown: str, timeout_s: float
) -> tuple[str | None, list[ConfigProblem]]:
    """Call the platform once as this channel's bot; return a line naming the bot, or the problem."""
    if not isinstance(channel, TelegramChannelConfig | SlackChannelConfig | DiscordChannelConfig):
        return None, []  # the terminal has nothing to connect to
    base = config.source.parent if config.source else None
    shapes = [p for p in shape_problems(config, shown=shown) if p.path.startswith(f"channels.{name}.")]
    if shapes:
        return None, shapes  # a token no platform issues: named without asking one
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            if isinstance(channel, TelegramChannelConfig):
                bot = await telegram_bot(session, channel.api_base_url, resolve_secret(channel.token, base=base))
                who = f"@{bot.get('username', '?')}"
            elif isinstance(channel, SlackChannelConfig):
                app = resolve_secret(channel.app_token, base=base) if channel.app_token else None
                who = await slack_identity(
                    session, channel.api_base_url, resolve_secret(channel.bot_token, base=base),
                    app if channel.mode == "socket" else None,
                )
            else:
                bot = await discord_bot(session, channel.api_base_url, resolve_secret(channel.token, base=base))
                who = str(bot.get("username", "?"))
    except SecretError:
        return None, []  # the secrets check names the key
    except ProbeRefused as exc:
        return None, [ConfigProblem(shown, f"channels.{name}", f"{channel.kind}: {exc}")]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        return None, [ConfigProblem(shown, f"channels.{name}", f"{channel.kind}: cannot connect ({reason})")]
    return f"channel {name} ({channel.kind}): connected as {who}", []


async def telegram_bot(session: aiohttp.ClientSession, api_base_url: str | None, token: str) -> dict[str, Any]:
    """Return the bot's `getMe` user; raise `ProbeRefused` if Telegram refuses the token."""
    api = (api_base_url or TELEGRAM_API).rstrip("/")
    async with session.get(f"{api}/bot{token}/getMe") as response:
        body: dict[str, Any] = await response.json(content_type=None)
    if not body.get("ok"):
        hint = ": check the token (from @BotFather)" if response.status in (401, 404) else ""
        raise ProbeRefused(f"getMe refused the token ({response.status} {body.get('description', '')}){hint}")
    result: dict[str, Any] = body["result"]
    return result


async def slack_identity(
    session: aiohttp.ClientSession, api_base_url: str | None, token: str, app_token: str | None
) -> str:
    """Return `bot in team` from auth.test; with `app_token`, also ask for a Socket Mode URL (never used)."""
    api = (api_base_url or SLACK_API).rstrip("/")
    async with session.post(f"{api}/auth.test", headers={"Authorization": f"Bearer {token}"}) as response:
        body: dict[str, Any] = await response.json(content_type=None)
    if not body.get("ok"):
        raise ProbeRefused(f"auth.test refused bot_token ({body.get('error', response.status)}): use the xoxb- token")
    if app_token is not None:
        # Asks for a Socket Mode URL only; nothing connects to it.
        headers = {"Authorization": f"Bearer {app_token}"}
        async with session.post(f"{api}/apps.connections.open", headers=headers) as response:
            opened: dict[str, Any] = await response.json(content_type=None)
        if not opened.get("ok"):
            raise ProbeRefused(
                f"apps.connections.open refused app_token ({opened.get('error', response.status)}): "
                "use the xapp- token with the connections:write scope"
            )
    return f"{body.get('user', '?')} in {body.get('team', '?')}"


async def discord_bot(session: aiohttp.ClientSession, api_base_url: str | None, token: str) -> dict[str, Any]:
    """Return the bot user; raise `ProbeRefused` for a refused token or a Message Content intent left off."""
    api = (api_base_url or DISCORD_API).rstrip("/")
    headers = {"Authorization": f"Bot {token}"}
    async with session.get(f"{api}/users/@me", headers=headers) as response:
        user: dict[str, Any] = await response.json(content_type=None)
    if response.status != 200:
        raise ProbeRefused(f"/users/@me refused the token ({response.status} {user.get('message', '')})")
    async with session.get(f"{api}/applications/@me", headers=headers) as response:
        application: dict[str, Any] = await response.json(content_type=None)
    if response.status != 200:
        raise ProbeRefused(f"/applications/@me answered {response.status} {application.get('message', '')}")
    if not int(application.get("flags") or 0) & (_GATEWAY_MESSAGE_CONTENT | _GATEWAY_MESSAGE_CONTENT_LIMITED):
        raise ProbeRefused(MESSAGE_CONTENT_HINT)
    return user
