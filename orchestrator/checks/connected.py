"""The checks the doctor runs once it knows more than the file: names that match nothing once the
MCP servers' tools are known, routes that admit nobody, and the models each provider must serve."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final

from orchestrator.config import AgentConfig, Config
from orchestrator.errors import ConfigProblem
from orchestrator.skills import find_skill_dirs, skill_catalog
from orchestrator.text import suggest
from orchestrator.policy import matches_any
from orchestrator.tools import (
    BUILTIN_NAMES,
    DELEGATE_TOOL_NAME,
    MEMORY_TOOL_NAMES,
    RESERVED_TOOL_NAMES,
    SEND_FILE_NAME,
    TOOL_SEARCH_NAME,
)

__all__ = ["ModelUse", "empty_config_problems", "models_in_use", "route_problems", "tool_name_problems"]

_GLOB_CHARS: Final = frozenset("*?[")


def empty_config_problems(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem when the config defines no agent: `run` would serve nothing."""
    if config.agents:
        return []
    counts = f"{len(config.providers)} providers, {len(config.channels)} channels, {len(config.routes)} routes"
    return [ConfigProblem(
        shown, "agents",
        f"the config defines no agent ({counts}), so nothing could answer: run `orchestrator init` to write "
        "a first config, or add a [providers.NAME] (base_url), an [agents.NAME] (provider, model), a "
        "[channels.NAME] and a [[routes]] entry (see docs/configuration.md)",
    )]


def route_problems(config: Config, *, shown: str) -> Iterator[ConfigProblem]:
    """Yield a problem per route with no `senders`: it matches, then admits nobody (unless it pairs strangers)."""
    for i, route in enumerate(config.routes):
        if not route.senders and route.strangers != "pair":  # a pairing route admits whom approvers pair
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


def _agent_tool_names(
    config: Config, agent: AgentConfig, offered: Mapping[str, frozenset[str] | None]
) -> frozenset[str]:
    """Return every tool name `agent` could hold before its `excluded_tools` are taken away.

    The same sources the seam's `assemble` grants from, read from the config and the offered
    MCP listings; an over-estimate where only a tool's spec decides (read-only autonomy), so
    a name outside it is certainly one the agent never holds.
    """
    names = {name for name in BUILTIN_NAMES if matches_any(name, agent.tools)}
    if agent.memory.scope == "agent":
        names.update(MEMORY_TOOL_NAMES)
    if DELEGATE_TOOL_NAME in agent.tools and agent.delegates:
        names.add(DELEGATE_TOOL_NAME)
    if SEND_FILE_NAME in agent.tools:
        names.add(SEND_FILE_NAME)
    for bundle_name in agent.mcp_bundles:
        bundle = config.mcp.bundles.get(bundle_name)
        if bundle is None:
            continue
        for server in bundle.servers:
            granted = [t for t in offered.get(server) or () if matches_any(t, bundle.tools.get(server, ()))]
            names.update(f"{server}__{tool}" for tool in granted)
            if granted and bundle.mode == "deferred":
                names.add(TOOL_SEARCH_NAME)
    for name in agent.peripherals:
        if name in config.peripherals:
            names.update(f"{name}__{command}" for command in config.peripherals[name].commands)
    if agent.skills:
        catalog = skill_catalog(config)
        available = set(find_skill_dirs(config))
        for skill in agent.skills:
            if skill in available:
                names.update(f"{skill}__{tool.name}" for tool in catalog.load(skill).tools)
    return frozenset(names)


def _holders(
    config: Config, offered: Mapping[str, frozenset[str] | None]
) -> dict[str, frozenset[str]]:
    return {name: _agent_tool_names(config, agent, offered) for name, agent in config.agents.items()}


def tool_name_problems(
    config: Config, offered: Mapping[str, frozenset[str] | None], *, shown: str
) -> Iterator[ConfigProblem]:
    """Yield a problem per approval, exclusion, SOP-step or schedule tool name the agent it is for cannot hold.

    Each name is matched against the tools of the agent that runs with it (a SOP step's own
    agent, a schedule's agent), so a name only another agent holds is
    reported with the agents that do. `offered` is each MCP server's own tool names, None for
    a server that did not connect: a name in its namespace is not judged (that server is
    reported on its own).
    """
    known = _every_tool_name(config, offered)
    holders = _holders(config, offered)
    down = {server for server, tools in offered.items() if tools is None}

    def check(file: str, key: str, entries: Iterable[str], agents: Sequence[str]) -> Iterator[ConfigProblem]:
        held = frozenset().union(*(holders.get(a, frozenset()) for a in agents))
        whose = " or ".join(repr(a) for a in agents)
        for i, entry in enumerate(entries):
            if entry.partition("__")[0] in down or any(fnmatchcase(name, entry) for name in held):
                continue
            what = "pattern" if _GLOB_CHARS & set(entry) else "name"
            others = sorted(
                a for a, names in holders.items() if a not in agents and any(fnmatchcase(n, entry) for n in names)
            )
            if others:
                message = (
                    f"{what} {entry!r} matches no tool agent {whose} holds "
                    f"(agent {', '.join(repr(a) for a in others)} holds it)"
                )
            elif any(fnmatchcase(name, entry) for name in known):
                message = f"{what} {entry!r} matches no tool agent {whose} holds (no agent is granted it)"
            elif what == "pattern":
                message = f"pattern {entry!r} matches no tool"
            else:
                message = f"name {entry!r} matches no tool" + suggest(entry, known)
            yield ConfigProblem(file, f"{key}[{i}]", message)

    for name, agent in config.agents.items():
        file = config.origin_of(name)
        yield from check(file, f"agents.{name}.excluded_tools", agent.excluded_tools, (name,))
        yield from check(file, f"agents.{name}.approval.auto_approve", agent.approval.auto_approve, (name,))
        yield from check(file, f"agents.{name}.approval.always_ask", agent.approval.always_ask, (name,))
    for name, sop in config.sops.items():
        for i, step in enumerate(sop.steps):
            yield from check(shown, f"sops.{name}.steps[{i}].tools", step.tools or (), (step.agent or sop.agent,))
    for i, schedule in enumerate(config.schedules):
        # an SOP schedule takes no `tools` (a load error): each step has its own
        agents = (schedule.agent,) if schedule.agent is not None else ()
        yield from check(shown, f"schedules[{i}].tools", schedule.tools or (), agents)

