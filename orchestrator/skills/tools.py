"""Skill tools bound to one agent's SecurityPolicy: the same runners as `shell` and `http_fetch`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import ToolFailure
from orchestrator.policy import SecurityPolicy
from orchestrator.skills.arguments import bind_arguments, parameters_schema
from orchestrator.skills.loader import Skill
from orchestrator.skills.manifest import SkillToolDef
from orchestrator.skills.templates import ArgvTemplate, UrlTemplate
from orchestrator.tools import Tool, ToolSource, ToolSpec, fetch_url, run_command

__all__ = ["SkillHttpTool", "SkillShellTool", "bind_skill_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillShellTool:
    """A skill's argv template, run like `shell`: allowlist, argument rules, workspace, timeout."""

    spec: ToolSpec
    definition: SkillToolDef
    template: ArgvTemplate
    policy: SecurityPolicy

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Check the arguments, fill the template and run it; raises `ToolFailure` when refused."""
        values = bind_arguments(self.definition.arguments, arguments, tool=self.spec.name)
        return await run_command(self.template.render(values), self.policy, tool=self.spec.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillHttpTool:
    """A skill's URL template, fetched like `http_fetch`: allowed hosts and the private-address guard."""

    spec: ToolSpec
    definition: SkillToolDef
    template: UrlTemplate
    policy: SecurityPolicy

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Check the arguments, encode them into the URL and send it; raises `ToolFailure` when refused."""
        name = self.spec.name
        values = bind_arguments(self.definition.arguments, arguments, tool=name)
        for key, value in values.items():
            refusal = self.template.refusal(key, value)
            if refusal is not None:
                raise ToolFailure(name, f"argument {key!r} refused: {refusal}")
        url = self.template.render(values)
        return await fetch_url(url, self.policy, tool=name, method=self.definition.method)


def bind_skill_tools(skill: Skill, policy: SecurityPolicy) -> dict[str, Tool]:
    """Return the skill's tools as `<skill>__<tool>`, each bound to `policy`."""
    tools: dict[str, Tool] = {}
    for definition in skill.tools:
        name = f"{skill.name}__{definition.name}"
        spec = ToolSpec(
            name=name,
            description=f"[skill {skill.name}] {definition.description}",
            parameters=parameters_schema(definition.arguments),
            # only a GET can be read-only; a command never is (the manifest refuses both)
            read_only=definition.read_only and definition.kind == "http" and definition.method == "GET",
            untrusted_output=definition.kind == "http",
            source=ToolSource.SKILL,
        )
        if definition.argv is not None:
            tools[name] = SkillShellTool(spec=spec, definition=definition, template=definition.argv, policy=policy)
        elif definition.url is not None:
            tools[name] = SkillHttpTool(spec=spec, definition=definition, template=definition.url, policy=policy)
    return tools
