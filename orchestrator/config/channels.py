"""Config models for `[channels.<name>]` (one bot each) and `[[routes]]`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from orchestrator.config.secrets import SecretRef

__all__ = [
    "API_ENVS",
    "ChannelConfig",
    "Channels",
    "DiscordChannelConfig",
    "RateLimitConfig",
    "RouteConfig",
    "SlackChannelConfig",
    "TelegramChannelConfig",
    "TerminalChannelConfig",
    "webhook_secret_problem",
]

NonEmptyStr = Annotated[str, Field(min_length=1)]

# What Telegram's setWebhook takes as `secret_token` (its Bot API documentation).
_WEBHOOK_SECRET: Final = re.compile(r"[A-Za-z0-9_-]{1,256}")


def webhook_secret_problem(value: str) -> str | None:
    """Return why Telegram would refuse `value` as a webhook's secret token, else None (never the value)."""
    if _WEBHOOK_SECRET.fullmatch(value):
        return None
    found = f"{len(value)} characters" if len(value) > 256 else "other characters"
    return f"Telegram takes 1-256 characters of A-Z, a-z, 0-9, '_' and '-' as a webhook secret; this one has {found}"


# Where each platform's API is, when not the real one (a local Bot API server, a proxy, a test's
# loopback fake): the default of a channel's `api_base_url`, so init, the doctor and the daemon
# all talk to the same place; an `api_base_url` in the file wins.
API_ENVS: Final = {
    "telegram": "ORCHESTRATOR_TELEGRAM_API",
    "slack": "ORCHESTRATOR_SLACK_API",
    "discord": "ORCHESTRATOR_DISCORD_API",
}


def _api_from_environment(platform: str) -> Callable[[], str | None]:
    return lambda: os.environ.get(API_ENVS[platform]) or None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class _ChannelModel(_Model):
    # Seconds a turn runs before the typing indicator is first shown (then every 4 s while
    # it runs); a quicker answer shows none. No-op where the platform has no indicator.
    typing_after_s: float = Field(default=0.5, ge=0, strict=True)
    # Stream replies into the chat as the model writes them (false: one message at the end).
    stream: bool = Field(default=True, strict=True)
    # Seconds between two edits of a streamed message in one chat (the platforms' rate limits).
    stream_edit_interval_s: float = Field(default=1.0, gt=0, strict=True)


class TelegramChannelConfig(_ChannelModel):
    """A Telegram bot: long polling by default, or a webhook with a secret-token header."""

    kind: Literal["telegram"]
    token: SecretRef
    api_base_url: NonEmptyStr | None = Field(default_factory=_api_from_environment("telegram"))
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: NonEmptyStr | None = None
    webhook_listen: NonEmptyStr = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535, strict=True)
    webhook_secret: SecretRef | None = None
    # Telegram's setWebhook max_connections: how many POSTs it may have open at once. Telegram
    # does not promise one chat's updates in order across connections; 1 makes it sequential.
    webhook_max_connections: int = Field(default=40, ge=1, le=100, strict=True)
    poll_timeout_s: float = Field(default=30.0, ge=0, strict=True)
    # how replies are shown: Markdown rendered through message entities, or the text as written
    format: Literal["markdown", "plain"] = "markdown"


class SlackChannelConfig(_ChannelModel):
    """A Slack app: Socket Mode by default, or the HTTP Events API with signature checks."""

    kind: Literal["slack"]
    bot_token: SecretRef
    app_token: SecretRef | None = None
    signing_secret: SecretRef | None = None
    api_base_url: NonEmptyStr | None = Field(default_factory=_api_from_environment("slack"))
    mode: Literal["socket", "http"] = "socket"
    http_listen: NonEmptyStr = "127.0.0.1"
    http_port: int = Field(default=3000, ge=0, le=65535, strict=True)  # 0 = any free port (tests)
    http_path: str = Field(default="/slack/events", pattern="^/")
    socket_ping_interval_s: float = Field(default=10.0, gt=0, strict=True)


class DiscordChannelConfig(_ChannelModel):
    """A Discord bot: DMs and guild channels, mention-only in guilds by default."""

    kind: Literal["discord"]
    token: SecretRef
    api_base_url: NonEmptyStr | None = Field(default_factory=_api_from_environment("discord"))
    gateway_url: NonEmptyStr | None = None
    # deprecated: `[[routes]] reply_in_groups` (true = "mention", false = "all" for this channel's routes)
    mention_only: bool = Field(default=True, strict=True)
    guild_ready_timeout_s: float = Field(default=2.0, ge=0, strict=True)

    @property
    def endpoints(self) -> tuple[str | None, str | None]:
        """Return (API base without a trailing slash, gateway URL); None = discord.py's default."""
        return (self.api_base_url.rstrip("/") if self.api_base_url else None), self.gateway_url


class TerminalChannelConfig(_ChannelModel):
    """A local chat on stdin/stdout for trying agents without any platform."""

    kind: Literal["terminal"]
    user: NonEmptyStr = "local"
    chat: NonEmptyStr = "terminal"


ChannelConfig = Annotated[
    TelegramChannelConfig | SlackChannelConfig | DiscordChannelConfig | TerminalChannelConfig,
    Field(discriminator="kind"),
]


def _one_discord_endpoint(channels: Mapping[str, object]) -> Mapping[str, object]:
    """Refuse Discord channels that disagree on endpoints: discord.py holds one set per process.

    Raises a `ValidationError` whose problems name the channel and the key that differs.
    """
    discord = [(name, c) for name, c in channels.items() if isinstance(c, DiscordChannelConfig)]
    errors: list[InitErrorDetails] = []
    for name, channel in discord[1:]:
        (api, gateway), (first_api, _) = channel.endpoints, discord[0][1].endpoints
        if (api, gateway) != discord[0][1].endpoints:
            message = (
                "all Discord channels in one daemon must share api_base_url and gateway_url "
                f"(channels.{discord[0][0]} differs)"
            )
            key = "api_base_url" if api != first_api else "gateway_url"
            errors.append(
                InitErrorDetails(type=PydanticCustomError("value_error", message), loc=(name, key), input=channel)
            )
    if errors:
        raise ValidationError.from_exception_data("channels", errors)
    return channels


# `[channels]`: every channel by name; the Discord ones must agree on their endpoints.
Channels = Annotated[dict[str, ChannelConfig], AfterValidator(_one_discord_endpoint)]


class RateLimitConfig(_Model):
    """`[[routes]] rate_limit`: at most `messages` per sender per chat in any `per_s` seconds (sliding)."""

    messages: int = Field(ge=1, le=10_000, strict=True)
    per_s: float = Field(gt=0, le=86_400, strict=True)


class RouteConfig(_Model):
    """`[[routes]]`: which agent answers which chat, for which senders; first match wins."""

    channel: NonEmptyStr
    agent: NonEmptyStr
    chat: NonEmptyStr = "*"
    senders: tuple[NonEmptyStr, ...] = ()
    session: Literal["per_sender", "per_chat"] = "per_sender"
    approvers: tuple[NonEmptyStr, ...] = ()
    # the SOPs this route's senders may start with `/sop NAME`; none by default
    sops: tuple[NonEmptyStr, ...] = ()
    # a sender not in `senders` in a DM: "ignore" (as before) or "pair" (gets a code an approver approves)
    strangers: Literal["ignore", "pair"] = "ignore"
    # per sender per chat; absent = no message rate limit (`/stop` and `/new` are never limited)
    rate_limit: RateLimitConfig | None = None
    # group gates (resolved in seam/group_gate.py): unset = "mention", or a Discord channel's legacy `mention_only`
    reply_in_groups: Literal["mention", "all"] | None = None
    wake_words: tuple[Annotated[str, Field(min_length=1, pattern=r"^\S(.*\S)?$")], ...] = ()
