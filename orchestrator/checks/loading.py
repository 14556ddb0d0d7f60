"""`load_config` and `parse_config`: validate the models, then cross-check the references."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.checks.references import check_references
from orchestrator.config import Config, read_config, validate_config
from orchestrator.errors import ConfigError, ConfigProblem

__all__ = ["load_config", "parse_config"]


def load_config(path: str | Path) -> Config:
    """Read, validate and cross-check a config file and its `agents.d/` directory.

    Raises `ConfigError` with one `ConfigProblem` per problem; never anything else for bad input.
    """
    document = read_config(path)
    return parse_config(
        document.raw,
        source=document.source,
        shown=document.shown,
        origins=document.origins,
        problems=document.problems,
    )


def parse_config(
    raw: Mapping[str, Any],
    *,
    source: Path | None = None,
    shown: str = "<config>",
    origins: Mapping[str, str] | None = None,
    problems: Iterable[ConfigProblem] = (),
) -> Config:
    """Validate and cross-check an already-parsed TOML document (tests and the library API).

    `problems` found earlier (while merging `agents.d/`) come first in the raised error.
    """
    found = list(problems)
    try:
        config = validate_config(raw, source=source, shown=shown, origins=origins)
    except ConfigError as exc:
        raise ConfigError([*found, *exc.problems]) from None
    found.extend(check_references(config, shown=shown))
    if found:
        raise ConfigError(found)
    return config
