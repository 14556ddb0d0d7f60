"""Read the main TOML file plus `agents.d/*.toml` and validate them into one `Config`.

This module checks only the models' own fields; cross-references (names that must exist
elsewhere, tools that must match something) are `orchestrator.checks`, whose
`load_config` composes both.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from orchestrator.config.models import Config
from orchestrator.errors import ConfigError, ConfigProblem
from orchestrator.text import suggest

__all__ = ["AGENTS_DIR_NAME", "ConfigDocument", "dotted", "read_config", "validate_config"]

AGENTS_DIR_NAME: typing.Final = "agents.d"
_CHANNEL_KINDS: typing.Final = frozenset({"telegram", "slack", "discord", "terminal"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDocument:
    """A config file and its `agents.d/` merged into one TOML document, not yet validated."""

    raw: Mapping[str, Any]
    source: Path
    shown: str
    origins: Mapping[str, str]  # agent name -> the agents.d file it came from
    problems: tuple[ConfigProblem, ...]  # found while merging (an agent defined twice)


def read_config(path: str | Path) -> ConfigDocument:
    """Read a config file and its `agents.d/` directory into one document.

    Raises `ConfigError` only when a file cannot be read or parsed as TOML.
    """
    main = Path(path)
    shown = str(path)
    raw = _read_toml(main, shown)
    origins: dict[str, str] = {}
    problems: list[ConfigProblem] = []
    agents_dir = main.parent / AGENTS_DIR_NAME
    if agents_dir.is_dir():
        agents = raw.setdefault("agents", {})
        if not isinstance(agents, dict):
            raise ConfigError([ConfigProblem(shown, "agents", "must be a table")])
        for file in sorted(agents_dir.glob("*.toml")):
            label = str(Path(shown).parent / AGENTS_DIR_NAME / file.name)
            name = file.stem
            if name in agents:
                problems.append(
                    ConfigProblem(label, f"agents.{name}", f"agent {name!r} is also defined in {shown}")
                )
                continue
            agents[name] = _read_toml(file, label)
            origins[name] = label
    return ConfigDocument(raw=raw, source=main, shown=shown, origins=origins, problems=tuple(problems))


def validate_config(
    raw: Mapping[str, Any],
    *,
    source: Path | None = None,
    shown: str = "<config>",
    origins: Mapping[str, str] | None = None,
) -> Config:
    """Validate a parsed TOML document against the models (no cross-reference checks).

    Raises `ConfigError` with one `ConfigProblem` per field problem.
    """
    origins = dict(origins or {})
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_translate(exc, shown, origins)) from None
    config.with_origins(source, origins)
    return config


# A newcomer's first run has no config yet: say how to get one.
_NOT_FOUND: Final = (
    "file not found (write one with `orchestrator init`, or start from the example: "
    "cp config.example.toml config.toml)"
)


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(shown, "", _NOT_FOUND)]) from None
    except OSError as exc:
        raise ConfigError([ConfigProblem(shown, "", f"cannot read: {exc.strerror}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([ConfigProblem(shown, "", f"invalid TOML: {exc}")]) from None


def dotted(loc: Iterable[int | str]) -> str:
    """Render a location tuple as `agents.ops.tools[2]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if part.replace("_", "").replace("-", "").isalnum() else f'"{part}"'
            out += f".{key}" if out else key
    return out


def _translate(
    exc: ValidationError, shown: str, origins: Mapping[str, str]
) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if len(loc) >= 3 and loc[0] == "channels" and loc[2] in _CHANNEL_KINDS:
            loc = loc[:2] + loc[3:]  # pydantic names the union member; the user wrote none
        file = shown
        if len(loc) >= 2 and loc[0] == "agents" and isinstance(loc[1], str):
            file = origins.get(loc[1], shown)
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(loc[-1])
            message = f"unknown key {key!r}" + suggest(key, _fields_at(loc[:-1]))
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            ctx = err.get("ctx") or {}
            loc = (*loc, str(ctx.get("discriminator", "kind")).strip("'"))
            found = ctx.get("tag")
            expected = ctx.get("expected_tags") or "'telegram', 'slack', 'discord', 'terminal'"
            message = (f"unknown kind {found!r}" if found else "missing required key") + (
                f"; expected one of {expected}"
            )
        elif kind == "missing":
            message = "missing required key"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            message = msg[:1].lower() + msg[1:]
            if kind not in ("value_error",) and not isinstance(err.get("input"), (dict, list)):
                message += f" (got {err.get('input')!r})"
        problems.append(ConfigProblem(file, dotted(loc), message))
    return problems


def _fields_at(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    """Return the allowed keys of the model found at `loc` (for did-you-mean)."""
    annotation: Any = Config
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return ()
    model = _model_of(annotation)
    return tuple(model.model_fields) if model else ()


def _step(annotation: Any, part: int | str) -> Any:
    model = _model_of(annotation)
    if model is not None:
        field = model.model_fields.get(str(part))
        return field.annotation if field else None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin is tuple and args:
        return args[0]
    return None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None
