"""The wizard's answers given as flags (`orchestrator init --help`), for scripts and CI."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path

from orchestrator.config import API_ENVS
from orchestrator.init.asking import InitAborted

__all__ = ["API_ENVS", "InitOptions", "read_token_file"]

# API_ENVS (where each platform's API is when not the real one): init writes the URL to the
# channel's `api_base_url`, so the config names it even where the variable is not set.


@dataclass(frozen=True, slots=True, kw_only=True)
class InitOptions:
    """What the flags answered; None means "ask" (or, non-interactive, "not wanted")."""

    config: str
    non_interactive: bool = False
    force: bool = False
    provider_url: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    model: str | None = None
    telegram_token_file: str | None = None
    telegram_sender: str | None = None
    telegram_delete_webhook: bool = False
    slack_bot_token_file: str | None = None
    slack_app_token_file: str | None = None
    slack_sender: str | None = None
    discord_token_file: str | None = None
    discord_sender: str | None = None
    wait_s: float = 120.0

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> InitOptions:
        """Take the fields this class has from parsed `orchestrator init` arguments."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def read_token_file(path: str, flag: str) -> str:
    """Return a token read from a file named by a flag; an unreadable or empty file stops the wizard."""
    try:
        value = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InitAborted(f"{flag} {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if not value:
        raise InitAborted(f"{flag} {path}: the file is empty")
    return value
