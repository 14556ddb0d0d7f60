"""One step per chat platform: check the token as the doctor will, then find who may talk to the bot.

Each step returns the `ChannelPlan` to write, or None when the platform is not wanted. A
refused token is asked again on a terminal; with `--non-interactive` it stops the wizard.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import aiohttp

from orchestrator.checks import sender_problem, token_shape_problem
from orchestrator.doctor import (
    MESSAGE_CONTENT_HINT,
    TELEGRAM_API,
    ProbeRefused,
    discord_bot,
    slack_identity,
    telegram_bot,
)
from orchestrator.errors import OrchestratorError
from orchestrator.init.asking import Asker, InitAborted
from orchestrator.init.online import online
from orchestrator.init.options import API_ENVS, InitOptions, read_token_file
from orchestrator.init.slack_manifest import slack_manifest
from orchestrator.init.writing import SECRET_FILES, ChannelPlan, secret_ref, write_file

__all__ = ["DISCORD_PERMISSIONS", "SLACK_MANIFEST_FILE", "discord_step", "slack_step", "telegram_step"]

SLACK_MANIFEST_FILE: Final = "slack-app-manifest.yaml"
# View Channels, Send Messages, Send Messages in Threads, Read Message History, Attach Files.
DISCORD_PERMISSIONS: Final = (1 << 10) | (1 << 11) | (1 << 38) | (1 << 16) | (1 << 15)
_POLL_S: Final = 10


def _token(asker: Asker, options_value: str | None, flag: str, question: str) -> str:
    if options_value is not None:
        return read_token_file(options_value, flag)
    return asker.secret(question, flag=flag)


def _checked(asker: Asker, platform: str, ask: Callable[[], str], check: Callable[[str], Any]) -> tuple[str, Any]:
    """Ask for a token until the platform accepts it; return (token, what the check returned)."""
    while True:
        token = ask()
        try:
            return token, check(token)
        except ProbeRefused as exc:
            if not asker.interactive:
                raise InitAborted(f"{platform}: {exc.reason}") from None
            asker.say(f"  {platform}: {exc.reason}")
            if not asker.confirm("  try another token?", default=True):
                raise InitAborted(f"{platform}: no token the platform accepts") from None


def _shaped(kind: str, key: str, token: str) -> None:
    """Raise `ProbeRefused` for a token of a shape the platform never issues (before asking it)."""
    problem = token_shape_problem(kind, key, token)
    if problem:
        raise ProbeRefused(f"{key}: {problem}" if kind == "slack" else problem)


def _shape_first(kind: str, check: Callable[[str], Any]) -> Callable[[str], Any]:
    """Return `check` preceded by the local shape check of a `token` key."""

    def checked(token: str) -> Any:
        _shaped(kind, "token", token)
        return check(token)

    return checked


def _sender(asker: Asker, kind: str, given: str | None, question: str, flag: str) -> str:
    """Return the user id for `senders`: `given` (its flag), else asked until it has the platform's shape."""
    if given is not None:
        problem = sender_problem(kind, given)
        if problem:
            raise InitAborted(f"{flag}: {problem}")
        return given
    return asker.ask(question, flag=flag, check=lambda answer: sender_problem(kind, answer))


def _api(platform: str) -> str | None:
    return os.environ.get(API_ENVS[platform]) or None


def _base_url_key(api: str | None) -> tuple[tuple[str, str], ...]:
    return (("api_base_url", api),) if api else ()


def telegram_step(asker: Asker, options: InitOptions) -> ChannelPlan | None:
    """Token -> getMe; then the first message sent to the bot names the user id for `senders`."""
    if options.telegram_token_file is None:
        if not asker.interactive or not asker.confirm("Add a Telegram bot?", default=False):
            return None
        asker.say("  In Telegram, talk to @BotFather: send /newbot, pick a name; it answers with the token.")
    api = _api("telegram")
    flag = "--telegram-token-file"
    token, bot = _checked(
        asker, "telegram",
        lambda: _token(asker, options.telegram_token_file, flag, "Telegram bot token (not shown)"),
        _shape_first("telegram", lambda t: online(lambda s: telegram_bot(s, api, t))),
    )
    username = bot.get("username", "?")
    asker.say(f"  connected as @{username}")
    sender = options.telegram_sender
    if sender is None:
        asker.say(f"  Now send any message to @{username} in Telegram (waiting up to {options.wait_s:g} s; "
                  "Ctrl-C stops) ...")
        found = _first_sender_or_webhook(asker, options, api, token)
        if found is not None:
            user_id, name = found
            if asker.confirm(f"  a message from {name} (user id {user_id}): let this user talk to the bot?", default=True):
                sender = user_id
    sender = _sender(asker, "telegram", sender, "Your Telegram user id (for `senders`)", "--telegram-sender")
    asker.say(f"  senders = [\"{sender}\"]: only this user may talk to the bot")
    return ChannelPlan(
        name="telegram", kind="telegram",
        keys=(("token", secret_ref(SECRET_FILES["telegram token"])), *_base_url_key(api)),
        senders=(sender,), secrets=MappingProxyType({SECRET_FILES["telegram token"]: token}),
    )


class _WebhookActive(OrchestratorError):
    """getUpdates answered 409: the bot has a webhook, so its updates go to that URL instead."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


def _first_sender_or_webhook(
    asker: Asker, options: InitOptions, api: str | None, token: str
) -> tuple[str, str] | None:
    """Wait for the first message; with a webhook in the way, offer to delete it (or say "type the id").

    Returns None (after saying why) when no message names the sender: the caller then asks
    for the id, which `--telegram-sender` answers in flags mode.
    """
    try:
        found = _first_sender(api, token, options.wait_s)
    except _WebhookActive as exc:
        url = _webhook_url(api, token)
        asker.say(f"  telegram: getUpdates answered 409 ({exc.description})")
        asker.say(f"  The bot has a webhook set{f' to {url}' if url else ''}: Telegram sends its messages there, "
                  "so they cannot be read here.")
        asker.say("  Deleting it moves the bot's messages back to polling (the config written here polls, and "
                  "`orchestrator run` deletes it at start anyway); whatever serves that URL stops receiving them.")
        if not asker.confirm("  delete the webhook now?", default=options.telegram_delete_webhook):
            asker.say("  webhook left as it is: type your user id instead (@userinfobot in Telegram tells it)"
                      + ("" if asker.interactive else "; or pass --telegram-delete-webhook"))
            return None
        _delete_webhook(api, token)
        asker.say("  webhook deleted; waiting for your message again ...")
        try:
            found = _first_sender(api, token, options.wait_s)
        except _WebhookActive as again:  # set again meanwhile by whatever else holds the token
            asker.say(f"  telegram: getUpdates still answers 409 ({again.description}): type your user id instead")
            return None
    if found is None:
        asker.say("  no message arrived")
    return found


def _webhook_url(api: str | None, token: str) -> str | None:
    """Return the URL getWebhookInfo reports, None when it cannot be had (it is only shown)."""
    base = f"{(api or TELEGRAM_API).rstrip('/')}/bot{token}"

    async def info(session: aiohttp.ClientSession) -> str | None:
        async with session.get(f"{base}/getWebhookInfo") as response:
            body: dict[str, Any] = await response.json(content_type=None)
        url = (body.get("result") or {}).get("url") if body.get("ok") else None
        return str(url) if url else None

    try:
        return online(info)
    except ProbeRefused:
        return None


def _delete_webhook(api: str | None, token: str) -> None:
    """Call deleteWebhook, keeping the pending updates (the first message may be one of them)."""
    base = f"{(api or TELEGRAM_API).rstrip('/')}/bot{token}"

    async def delete(session: aiohttp.ClientSession) -> None:
        async with session.post(f"{base}/deleteWebhook", data={"drop_pending_updates": "false"}) as response:
            body: dict[str, Any] = await response.json(content_type=None)
        if not body.get("ok"):
            raise ProbeRefused(f"deleteWebhook answered {response.status} {body.get('description', '')}")

    try:
        online(delete)
    except ProbeRefused as exc:
        raise InitAborted(f"telegram: {exc.reason}") from None


def _first_sender(api: str | None, token: str, wait_s: float) -> tuple[str, str] | None:
    """Long-poll getUpdates for the first user message; confirm it, so the daemon does not answer it later."""
    base = f"{(api or TELEGRAM_API).rstrip('/')}/bot{token}"

    async def wait(session: aiohttp.ClientSession) -> tuple[str, str] | None:
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        offset = 0
        while (left := deadline - loop.time()) > 0:
            params = {"timeout": str(max(0, min(_POLL_S, int(left)))), "offset": str(offset)}
            async with session.get(f"{base}/getUpdates", params=params) as response:
                body: dict[str, Any] = await response.json(content_type=None)
            if response.status == 409:
                raise _WebhookActive(str(body.get("description") or "Conflict"))
            if not body.get("ok"):
                raise ProbeRefused(f"getUpdates answered {response.status} {body.get('description', '')}")
            for update in body["result"]:
                offset = int(update["update_id"]) + 1
                sender = (update.get("message") or {}).get("from") or {}
                if sender.get("id") is not None and not sender.get("is_bot"):
                    async with session.get(f"{base}/getUpdates", params={"offset": str(offset), "timeout": "0"}):
                        pass
                    name = " ".join(str(sender[k]) for k in ("first_name", "last_name") if sender.get(k))
                    if sender.get("username"):
                        name += f" (@{sender['username']})"
                    return str(sender["id"]), name or "someone"
            if int(left) <= 0:
                break
        return None

    try:
        return online(wait, timeout_s=wait_s + _POLL_S + 5)
    except ProbeRefused as exc:
        raise InitAborted(f"telegram: {exc.reason}") from None


def slack_step(asker: Asker, options: InitOptions, folder: Path, *, written: list[Path]) -> ChannelPlan | None:
    """Write the app manifest (added to `written`: it is needed before the tokens exist), then
    check the bot and app tokens (auth.test, apps.connections.open)."""
    if options.slack_bot_token_file is None:
        if not asker.interactive or not asker.confirm("Add a Slack app?", default=False):
            return None
    manifest = folder / SLACK_MANIFEST_FILE
    write_file(manifest, slack_manifest())
    written.append(manifest)
    asker.say(f"  wrote {manifest}: at https://api.slack.com/apps?new_app=1 choose \"From a manifest\", paste it,")
    asker.say("  then Install to Workspace. Copy the Bot User OAuth Token (xoxb-) from OAuth & Permissions, and")
    asker.say("  under Basic Information -> App-Level Tokens create one with the connections:write scope (xapp-).")
    api = _api("slack")
    tokens: dict[str, str] = {}

    def ask() -> str:
        tokens["app"] = _token(asker, options.slack_app_token_file, "--slack-app-token-file", "App-Level Token (xapp-, not shown)")
        return _token(asker, options.slack_bot_token_file, "--slack-bot-token-file", "Bot User OAuth Token (xoxb-, not shown)")

    def check(token: str) -> str:
        _shaped("slack", "bot_token", token)
        _shaped("slack", "app_token", tokens["app"])
        return online(lambda s: slack_identity(s, api, token, tokens["app"]))

    bot_token, who = _checked(asker, "slack", ask, check)
    asker.say(f"  connected as {who}")
    sender = _sender(
        asker, "slack", options.slack_sender,
        "Your Slack member id (your profile -> the ... menu -> Copy member ID, like U012AB3CD)", "--slack-sender",
    )
    asker.say(f"  senders = [\"{sender}\"]: only this user may talk to the bot")
    return ChannelPlan(
        name="slack", kind="slack",
        keys=(("bot_token", secret_ref(SECRET_FILES["slack bot token"])), ("app_token", secret_ref(SECRET_FILES["slack app token"])),
              *_base_url_key(api)),
        senders=(sender,),
        secrets=MappingProxyType({SECRET_FILES["slack bot token"]: bot_token, SECRET_FILES["slack app token"]: tokens["app"]}),
    )


def discord_step(asker: Asker, options: InitOptions) -> ChannelPlan | None:
    """Token -> /users/@me and the Message Content intent; print the invite link with the permissions needed."""
    if options.discord_token_file is None:
        if not asker.interactive or not asker.confirm("Add a Discord bot?", default=False):
            return None
        asker.say("  At https://discord.com/developers/applications: New Application -> Bot -> Reset Token, copy it;")
        asker.say("  on the same page switch on Privileged Gateway Intents -> Message Content Intent.")
    api = _api("discord")
    flag = "--discord-token-file"
    while True:
        token, bot = _checked(
            asker, "discord",
            lambda: _token(asker, options.discord_token_file, flag, "Discord bot token (not shown)"),
            _shape_first("discord", lambda t: _discord_or_intent(api, t)),
        )
        if bot is not None:
            break
        if not asker.interactive:
            raise InitAborted(f"discord: {MESSAGE_CONTENT_HINT}")
        asker.say(f"  {MESSAGE_CONTENT_HINT}")
        asker.ask("  press Enter once it is on (then paste the token again)", default="")
    asker.say(f"  connected as {bot.get('username', '?')}")
    asker.say("  Invite the bot to your server with this link (the permissions it needs are filled in):")
    asker.say(f"  https://discord.com/oauth2/authorize?client_id={bot.get('id')}&scope=bot&permissions={DISCORD_PERMISSIONS}")
    sender = _sender(
        asker, "discord", options.discord_sender,
        "Your Discord user id (Settings -> Advanced -> Developer Mode on; right-click your name -> Copy User ID)",
        "--discord-sender",
    )
    asker.say(f"  senders = [\"{sender}\"]: only this user may talk to the bot")
    return ChannelPlan(
        name="discord", kind="discord",
        keys=(("token", secret_ref(SECRET_FILES["discord token"])), *_base_url_key(api)),
        senders=(sender,), secrets=MappingProxyType({SECRET_FILES["discord token"]: token}),
    )


def _discord_or_intent(api: str | None, token: str) -> dict[str, Any] | None:
    """The bot user; None when only the Message Content intent is missing (the token is good)."""
    try:
        return online(lambda s: discord_bot(s, api, token))
    except ProbeRefused as exc:
        if exc.reason == MESSAGE_CONTENT_HINT:
            return None
        raise
