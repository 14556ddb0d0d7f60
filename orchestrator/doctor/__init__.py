"""The doctor (`orchestrator check --connect`): what only this environment and the network can tell.

`orchestrator.checks` proves the config is consistent; the doctor resolves every secret
here, connects every MCP server, asks each provider in use for its models and each channel
for its bot, and checks the names that only then can be matched.
"""

from orchestrator.doctor.channels import (
    DISCORD_API,
    MESSAGE_CONTENT_HINT,
    SLACK_API,
    TELEGRAM_API,
    discord_bot,
    slack_identity,
    telegram_bot,
)
from orchestrator.doctor.providers import openai_models
from orchestrator.doctor.refused import ProbeRefused
from orchestrator.doctor.run import run_doctor

__all__ = [
    "DISCORD_API",
    "MESSAGE_CONTENT_HINT",
    "SLACK_API",
    "TELEGRAM_API",
    "ProbeRefused",
    "discord_bot",
    "openai_models",
    "run_doctor",
    "slack_identity",
    "telegram_bot",
]
