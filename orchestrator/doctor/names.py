"""Names that match nothing once every source of tools is known (MCP servers connected), and routes
that admit nobody."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Final

from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.mcp import ServerOffer
from orchestrator.skills import find_skill_dirs, skill_catalog
from orchestrator.text import suggest
from orchestrator.tools import BUILTIN_NAMES, RESERVED_TOOL_NAMES

__all__ = ["every_tool_name", "route_problems", "tool_name_problems"]

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


def every_tool_name(config: Config, offers: Mapping[str, ServerOffer | None]) -> frozenset[str]:
    """Return every tool name some agent could hold: built-ins, skill, peripheral and offered MCP tools."""
    names = set(BUILTIN_NAMES | RESERVED_TOOL_NAMES)
    for server, offer in offers.items():
        names.update(f"{server}__{tool.name}" for tool in (offer.tools if offer else ()))
    for name, device in config.peripherals.items():
        names.update(f"{name}__{command}" for command in device.commands)
    skills = find_skill_dirs(config)
    if skills:
        catalog = skill_catalog(config)
        for skill in skills:
            names.update(f"{skill}__{tool.name}" for tool in catalog.load(skill).tools)
    return frozenset(names)


def tool_name_problems(
    config: Config, offers: Mapping[str, ServerOffer | None], *, shown: str
) -> Iterator[ConfigProblem]:
    """Yield a problem per approval, exclusion, SOP-step or schedule tool name that matches no tool.

    A name in the namespace of an MCP server that did not connect is not judged (that server
    is reported on its own).
    """
    known = every_tool_name(config, offers)
    down = {server for server, offer in offers.items() if offer is None}

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
