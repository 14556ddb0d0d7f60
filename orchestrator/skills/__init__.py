"""Skills: `SKILL.md` instructions for the system prompt plus tools declared in `skill.toml`.

Loaded once per config generation (the config check loads every skill an agent uses, so a
broken skill stops `orchestrator check` and the daemon's start); the seam binds a skill's
tools to the agent's SecurityPolicy, and they pass the same filter as every other tool.
"""

from orchestrator.skills.arguments import ArgumentSpec
from orchestrator.skills.loader import Skill, SkillCatalog, find_skill_dirs, load_skill, skill_catalog
from orchestrator.skills.manifest import SkillToolDef
from orchestrator.skills.tools import SkillHttpTool, SkillShellTool, bind_skill_tools

__all__ = [
    "ArgumentSpec",
    "Skill",
    "SkillCatalog",
    "SkillHttpTool",
    "SkillShellTool",
    "SkillToolDef",
    "bind_skill_tools",
    "find_skill_dirs",
    "load_skill",
    "skill_catalog",
]
