"""Resolve every secret reference the config holds, in this environment, as the daemon would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from orchestrator.config import Config, SecretRef, dotted, resolve_secret
from orchestrator.errors import ConfigProblem, SecretError

__all__ = ["secret_problems"]


def secret_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem per reference that does not resolve here (unset variable, unreadable file)."""
    base = config.source.parent if config.source else None
    problems: list[ConfigProblem] = []
    for loc, ref in _references(config, ()):
        try:
            resolve_secret(ref, base=base)
        except SecretError as exc:
            file = config.origin_of(str(loc[1])) if loc[:1] == ("agents",) else shown
            problems.append(ConfigProblem(file, dotted(loc), f"{ref!r}: {exc.reason}"))
    return problems


def _references(value: Any, loc: tuple[int | str, ...]) -> Iterator[tuple[tuple[int | str, ...], SecretRef]]:
    if isinstance(value, SecretRef):
        yield loc, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _references(getattr(value, name), (*loc, name))
    elif isinstance(value, dict):
        # `[mcp.servers.X] env` / `headers` take references as plain strings.
        plain = loc[-1:] in (("env",), ("headers",)) and loc[:2] == ("mcp", "servers")
        for key, item in value.items():
            if plain and isinstance(item, str) and item.partition(":")[0] in ("env", "file") and ":" in item:
                yield (*loc, key), SecretRef(item)
            else:
                yield from _references(item, (*loc, key))
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _references(item, (*loc, i))
