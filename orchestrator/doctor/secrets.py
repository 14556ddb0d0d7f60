"""Resolve every secret reference the config holds, in this environment, as the daemon would."""

from __future__ import annotations

from orchestrator.checks import secret_references
from orchestrator.config import Config, dotted, resolve_secret
from orchestrator.errors import ConfigProblem, SecretError

__all__ = ["secret_problems"]


def secret_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem per reference that does not resolve here (unset variable, unreadable file)."""
    base = config.source.parent if config.source else None
    problems: list[ConfigProblem] = []
    for loc, ref in secret_references(config):
        try:
            resolve_secret(ref, base=base)
        except SecretError as exc:
            file = config.origin_of(str(loc[1])) if loc[:1] == ("agents",) else shown
            problems.append(ConfigProblem(file, dotted(loc), f"{ref!r}: {exc.reason}"))
    return problems
