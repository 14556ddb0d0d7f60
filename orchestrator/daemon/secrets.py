"""Channel secrets are resolved before the daemon starts or swaps in a reloaded config."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.config import Config, SecretRef, webhook_secret_problem
from orchestrator.errors import ConfigProblem, SecretError

__all__ = ["channel_secret_problems"]


def channel_secret_problems(config: Config, lookup: Callable[[SecretRef], str]) -> list[ConfigProblem]:
    """Resolve every channel's secrets now; one problem per reference that does not resolve.

    Secrets are resolved where they are used (the daemon's environment, not `check`'s), so
    the daemon asks before it starts or swaps in a reloaded config: a missing token is one
    clear line, never a traceback or a half-applied reload. A Telegram `webhook_secret`
    Telegram would refuse is a problem too, in the words `check` uses.
    """
    shown = str(config.source or "<config>")
    problems: list[ConfigProblem] = []
    for name, settings in config.channels.items():
        for key, value in settings:
            if isinstance(value, SecretRef):
                try:
                    resolved = lookup(value)
                except SecretError as exc:
                    problems.append(ConfigProblem(shown, f"channels.{name}.{key}", str(exc)))
                    continue
                if key == "webhook_secret" and (problem := webhook_secret_problem(resolved)):
                    problems.append(ConfigProblem(shown, f"channels.{name}.{key}", problem))
    return problems
