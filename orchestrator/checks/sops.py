"""Cross-reference checks for `[sops.<name>]`: agents that exist, step tools that match something."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.text import suggest

__all__ = ["check_sops"]


def check_sops(
    config: Config, *, shown: str, check_tool: Callable[[str], str | None]
) -> Iterator[ConfigProblem]:
    """Yield one problem per unknown agent or step tool name that names nothing."""
    for name, sop in config.sops.items():
        base = f"sops.{name}"
        if sop.agent not in config.agents:
            yield ConfigProblem(shown, f"{base}.agent", f"unknown agent {sop.agent!r}" + suggest(sop.agent, config.agents))
        for i, step in enumerate(sop.steps):
            where = f"{base}.steps[{i}]"
            if step.agent is not None and step.agent not in config.agents:
                yield ConfigProblem(
                    shown, f"{where}.agent", f"unknown agent {step.agent!r}" + suggest(step.agent, config.agents)
                )
            for j, tool in enumerate(step.tools or ()):
                problem = check_tool(tool)
                if problem:
                    yield ConfigProblem(shown, f"{where}.tools[{j}]", problem)
