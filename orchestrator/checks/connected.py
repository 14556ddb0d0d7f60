"""The checks the doctor runs once it knows more than the file: names that match nothing once the
MCP servers' tools are known, routes that admit nobody, and the models each provider must serve."""

from __future__ import annotations

import os

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final

from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.skills import find_skill_dirs, skill_catalog
from orchestrator.text import suggest
from orchestrator.tools import BUILTIN_NAMES, RESERVED_TOOL_NAMES

__all__ = ["ModelUse", "models_in_use", "route_problems", "tool_name_problems"]

_GLOB_CHARS: Final = frozenset("*?[")


def route_problems(config: Config, *, shown: str) -> Iterator[ConfigProblem]:
    """Yield a problem per route with no `senders`: it matches, then admits nobody."""
    for i, route in enumerate(config.routes):
        if not route.senders:
            yield ConfigProblem(
                shown, f"routes[{i}].senders",
                "empty, so this route admits nobody: list the user ids allowed (\"*\" = anyone); "
                "`orchestrator run` logs `no route ... sender ID` with the id of each sender it refuses",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUse:
    """One agent's model on its provider, and where the config names it."""

    model: str
    file: str
    key: str


def models_in_use(config: Config, provider: str) -> tuple[ModelUse, ...]:
    """Return each model an agent runs on `provider`, `fallback` links included (`model_env` applied)."""
    env = config.providers[provider].model_env
    override = os.environ.get(env) if env else None
    uses: list[ModelUse] = []
    for name, agent in config.agents.items():
        file = config.origin_of(name)
        if agent.provider == provider:
            uses.append(ModelUse(model=override or agent.model, file=file, key=f"agents.{name}.model"))
        for i, link in enumerate(agent.fallback):
            if link.provider == provider:
                uses.append(ModelUse(model=override or link.model, file=file, key=f"agents.{name}.fallback[{i}].model"))
    return tuple(uses)


def _every_tool_name(config: Config, offered: Mapping[str, frozenset[str] | None]) -> frozenset[str]:
    """Return every tool name some agent could hold: built-ins, skill, peripheral and offered MCP tools."""
    names = set(BUILTIN_NAMES | RESERVED_TOOL_NAMES)
    for server, tools in offered.items():
        names.update(f"{server}__{tool}" for tool in tools or ())
    for name, device in config.peripherals.items():
        names.update(f"{name}__{command}" for command in device.commands)
    skills = find_skill_dirs(config)
    if skills:
        catalog = skill_catalog(config)
        for skill in skills:
            names.update(f"{skill}__{tool.name}" for tool in catalog.load(skill).tools)
    return frozenset(names)


def tool_name_problems(
    config: Config, offered: Mapping[str, frozenset[str] | None], *, shown: str
) -> Iterator[ConfigProblem]:
    """Yield a problem per approval, exclusion, SOP-step or schedule tool name that matches no tool.

    `offered` is each MCP server's own tool names, None for a server that did not connect:
    a name in its namespace is not judged (that server is reported on its own).
    """
    known = _every_tool_name(config, offered)
    down = {server for server, tools in offered.items() if tools is None}

    def check(file: str, key: str, entries: Iterable[str]) -> Iterator[ConfigProblem]:
        for i, entry in enumerate(entries):
            if entry.partition("__")[0] in down or any(fnmatchcase(name, entry) for name in known):
                continue
            if _GLOB_CHARS & set(entry):
                yield ConfigProblem(file, f"{key}[{i}]", f"pattern {entry!r} matches no tool")
            else:
                yield ConfigProblem(file, f"{key}[{i}]", f"name {entry!r} matches no tool" + suggest(entry, known))

    for name, agent in config.agents.items():
        file = config.origin_of(name)
        yield from check(file, f"agents.{name}.excluded_tools", agent.excluded_tools)
        yield from check(file, f"agents.{name}.approval.auto_approve", agent.approval.auto_approve)
        yield from check(file, f"agents.{name}.approval.always_ask", agent.approval.always_ask)
    for name, sop in config.sops.items():
        for i, step in enumerate(sop.steps):
            yield from check(shown, f"sops.{name}.steps[{i}].tools", step.tools or ())
    for i, schedule in enumerate(config.schedules):
        yield from check(shown, f"schedules[{i}].tools", schedule.tools or ())
