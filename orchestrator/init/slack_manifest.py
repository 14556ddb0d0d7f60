"""The Slack app manifest this project needs: the scopes, events and settings the adapter uses.

One source: `orchestrator init` writes it, and `examples/slack-app-manifest.yaml` is this
text (a test compares them).
"""

from __future__ import annotations

from typing import Final

__all__ = ["SLACK_BOT_EVENTS", "SLACK_BOT_SCOPES", "slack_manifest"]

# app_mention: a mention in a channel; message.im: a direct message; message.channels and
# message.groups: the other messages of the public and private channels the bot is in, which the
# route's group gate weighs (a reply in the bot's thread, a wake word, `reply_in_groups = "all"`).
SLACK_BOT_EVENTS: Final = ("app_mention", "message.im", "message.channels", "message.groups")
# Reading those events, and writing replies and approval prompts (chat.postMessage, chat.update;
# chat:write also covers the chat streams and assistant.threads.setStatus, the thread status,
# since Slack folded assistant:write into it);
# files:read downloads attachments (url_private, and files.info for Slack Connect files),
# files:write is send_file (the external upload flow).
SLACK_BOT_SCOPES: Final = (
    "app_mentions:read", "channels:history", "chat:write", "files:read", "files:write", "groups:history",
    "im:history", "im:read", "im:write",
)


def slack_manifest() -> str:
    """Return the manifest YAML: Socket Mode, interactivity for the approval buttons, DMs on."""
    scopes = "".join(f"      - {scope}\n" for scope in SLACK_BOT_SCOPES)
    events = "".join(f"      - {event}\n" for event in SLACK_BOT_EVENTS)
    return (
        "# Slack app manifest for orchestrator (written by `orchestrator init`; docs/quickstart-slack.md).\n"
        "# https://api.slack.com/apps?new_app=1 -> From a manifest -> paste this file.\n"
        "display_information:\n"
        "  name: orchestrator\n"
        "  description: A chat-channel agent daemon\n"
        "features:\n"
        "  app_home:\n"
        "    home_tab_enabled: false\n"
        "    messages_tab_enabled: true\n"
        "    messages_tab_read_only_enabled: false\n"
        "  bot_user:\n"
        "    display_name: orchestrator\n"
        "    always_online: true\n"
        "oauth_config:\n"
        "  scopes:\n"
        "    bot:\n"
        f"{scopes}"
        "settings:\n"
        "  event_subscriptions:\n"
        "    bot_events:\n"
        f"{events}"
        "  interactivity:\n"
        "    is_enabled: true\n"
        "  org_deploy_enabled: false\n"
        "  socket_mode_enabled: true\n"
        "  token_rotation_enabled: false\n"
    )
