"""Config checks for skills: every skill an agent uses loads cleanly, and skill tool names exist."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config import AgentConfig, Config
from orchestrator.errors import ConfigError, ConfigProblem
from orchestrator.policy import matches_any
from orchestrator.text import suggest

if TYPE_CHECKING:
    from orchestrator.skills import Skill

__all__ = ["check_skills"]

_GLOB_CHARS = frozenset("*?[")


def _runnable(file: str, where: str, agent: AgentConfig, skill: Skill) -> Iterator[ConfigProblem]:
    """A shell tool the agent is given must be able to run under its `[agents.X.shell]`.

    Its command must be in `allowed_commands` and no literal argv element may match
    `denied_args`; otherwise every call would be refused, so the config says so now. A
    tool the agent excludes (`excluded_tools`) is not given and not checked.
    """
    for tool in skill.tools:
        full = f"{skill.name}__{tool.name}"
        if tool.argv is None or matches_any(full, agent.excluded_tools):
            continue
        literals = tool.argv.literals
        command = literals[0][1]
        if command not in agent.shell.allowed_commands:
            yield ConfigProblem(
                file, where,
                f"skill tool {full} runs {command!r}, which [shell] allowed_commands does not list: "
                f"allow it, or add {full!r} to excluded_tools",
            )
        for index, text in literals:
            for pattern in agent.shell.denied_args:
                if fnmatch.fnmatchcase(text, pattern):
                    yield ConfigProblem(
                        file, where,
                        f"skill tool {full} has argv[{index}] {text!r}, which [shell] denied_args "
                        f"refuses ({pattern!r}): it could never run",
                    )


def check_skills(config: Config, *, shown: str, skill_dirs: dict[str, Path]) -> Iterator[ConfigProblem]:
    """Yield the problems of the skills agents use, once per skill, and of `<skill>__<tool>` names.

    Loading here (through the generation's catalog) is what makes a broken skill stop
    `orchestrator check` and the daemon's start; `resolve()` later reuses the same load.
    """
    used = dict.fromkeys(s for agent in config.agents.values() for s in agent.skills if s in skill_dirs)
    if not used:
        return  # and the skills package is not even imported
    from orchestrator.skills import skill_catalog

    catalog = skill_catalog(config)
    tools: dict[str, frozenset[str]] = {}
    for name in used:
        clash = "MCP server" if name in config.mcp.servers else "peripheral" if name in config.peripherals else None
        if clash:
            yield ConfigProblem(
                shown, "skills.dirs", f"skill {name!r} has the name of a {clash}; their tool names would collide"
            )
        try:
            tools[name] = frozenset(t.name for t in catalog.load(name).tools)
        except ConfigError as exc:
            yield from exc.problems
    for agent_name, agent in config.agents.items():
        for i, skill in enumerate(agent.skills):
            if skill in tools:
                where = f"agents.{agent_name}.skills[{i}]"
                yield from _runnable(config.origin_of(agent_name), where, agent, catalog.load(skill))
    for agent_name, agent in config.agents.items():
        file = config.origin_of(agent_name)
        for key, entries in (
            ("excluded_tools", agent.excluded_tools),
            ("approval.auto_approve", agent.approval.auto_approve),
            ("approval.always_ask", agent.approval.always_ask),
        ):
            for i, entry in enumerate(entries):
                skill, sep, tool = entry.partition("__")
                if not sep or skill not in tools or _GLOB_CHARS & set(tool) or tool in tools[skill]:
                    continue
                yield ConfigProblem(
                    file,
                    f"agents.{agent_name}.{key}[{i}]",
                    f"skill {skill!r} declares no tool {tool!r}" + suggest(tool, tools[skill]),
                )
