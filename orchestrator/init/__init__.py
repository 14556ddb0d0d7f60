"""`orchestrator init`: a first config from a few questions, each answer checked against its endpoint.

It asks for the model server (and offers the models it serves), then each chat platform
(the token checked as the doctor checks it, and the user id for `senders` found from a
first message where the platform allows), writes `config.toml` with the secrets in 0600
files referenced as `file:`, and ends by running the doctor. Every question has a flag,
so scripts run it with `--non-interactive`.
"""

from orchestrator.init.asking import InitAborted
from orchestrator.init.options import API_ENVS, InitOptions
from orchestrator.init.platforms import DISCORD_PERMISSIONS
from orchestrator.init.slack_manifest import SLACK_BOT_EVENTS, SLACK_BOT_SCOPES, slack_manifest
from orchestrator.init.wizard import run_init
from orchestrator.init.writing import SECRET_FILES, SECRETS_DIR

__all__ = [
    "API_ENVS",
    "DISCORD_PERMISSIONS",
    "SLACK_BOT_EVENTS",
    "SLACK_BOT_SCOPES",
    "SECRETS_DIR",
    "SECRET_FILES",
    "InitAborted",
    "InitOptions",
    "run_init",
    "slack_manifest",
]
