"""The `delegate` tool: hand a task to another agent, which runs under its OWN resolved policy.

Granted only when an agent names `delegate` in `tools` and lists targets in `delegates`; the
model can name only those targets. Each call re-enters `resolve()` for the target on the
DELEGATE path (never reusing the caller's registry), capped by what is left of the caller's
turn, on a fresh child transcript that holds only the task text the caller wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from orchestrator.errors import OrchestratorError, ToolFailure
from orchestrator.tools import Tool, ToolSource, ToolSpec

if TYPE_CHECKING:
    from orchestrator.config import AgentConfig, Config
    from orchestrator.seam.services import Services

__all__ = ["DELEGATE_TOOL_NAME", "DelegateTool", "delegate_tools", "delegation_reach"]

DELEGATE_TOOL_NAME: Final = "delegate"
# Budgets that are not the caller's turn budgets: a ceiling leaves them to the target.
_UNCAPPED: Final = 2**31 - 1


def delegate_tools(
    config: Config, agent_name: str, agent: AgentConfig, services: Services | None
) -> dict[str, Tool]:
    """Return `{"delegate": tool}` when the agent holds the grant, else nothing.

    The grant is the exact name in `tools` (no glob, not `"*"`) plus a non-empty
    `delegates`; without services (nothing to resolve the target with) it grants nothing.
    """
    if services is None or DELEGATE_TOOL_NAME not in agent.tools or not agent.delegates:
        return {}
    return {
        DELEGATE_TOOL_NAME: DelegateTool(
            config=config, caller=agent_name, targets=tuple(agent.delegates), services=services
        )
    }


class DelegateTool:
    """Runs one task on a target agent and returns the target's final text."""

    __slots__ = ("_caller", "_config", "_services", "_targets", "spec")

    def __init__(self, *, config: Config, caller: str, targets: tuple[str, ...], services: Services) -> None:
        self._config = config
        self._caller = caller
        self._targets = targets
        self._services = services
        self.spec = ToolSpec(
            name=DELEGATE_TOOL_NAME,
            description=(
                "Hand a self-contained task to another agent and get its final answer back. "
                "The other agent sees only the task text you write, not this conversation."
            ),
            parameters=MappingProxyType(
                {
                    "type": "object",
                    "properties": {
                        "agent": {"type": "string", "enum": list(targets), "description": "who does the task"},
                        "task": {"type": "string", "description": "everything the agent needs to know"},
                    },
                    "required": ["agent", "task"],
                    "additionalProperties": False,
                }
            ),
            read_only=False,  # the target may write under its own policy
            source=ToolSource.SEAM,
        )

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Run the task on the target; raises ToolFailure when it may not or did not finish."""
        from orchestrator.engine import StopReason, Transcript, current_turn, run_tool_call_loop
        from orchestrator.seam.execution import RuntimeKnobs
        from orchestrator.seam.path_builders import build_delegate

        target, task = arguments.get("agent"), arguments.get("task")
        if not isinstance(target, str) or target not in self._targets:
            raise ToolFailure(
                DELEGATE_TOOL_NAME,
                f"{target!r} is not an agent {self._caller} may delegate to (allowed: {', '.join(self._targets)})",
            )
        if not isinstance(task, str) or not task.strip():
            raise ToolFailure(DELEGATE_TOOL_NAME, "'task' must be a non-empty string")
        turn = current_turn()
        if turn is None or turn.execution.identity.agent != self._caller:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"can only be called inside a turn of {self._caller!r}")
        limit = self._config.daemon.max_delegation_depth
        if turn.depth + 1 > limit:
            raise ToolFailure(
                DELEGATE_TOOL_NAME, f"the delegation depth limit ({limit}) is reached; do the task without delegating"
            )
        caller = turn.execution
        # The engine also bounds this call by the caller's tool timeout: the child cannot outlive it.
        time_left = min(turn.remaining_s(), caller.knobs.tool_timeout_s)
        ceiling = RuntimeKnobs(
            max_tool_iterations=turn.remaining_iterations(),
            turn_timeout_s=time_left,
            tool_timeout_s=time_left,
            max_tool_result_chars=caller.knobs.max_tool_result_chars,
            max_history_messages=_UNCAPPED,
            max_actions_per_hour=_UNCAPPED,
        )
        try:
            execution = build_delegate(
                self._config, target, self._services,
                parent=self._caller, interactivity=caller.approvals.interactivity, ceiling=ceiling,
            )
        except OrchestratorError as exc:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"cannot start {target!r}: {exc}") from exc
        logger.info("{} delegates to {} (depth {})", self._caller, target, turn.depth + 1)
        transcript = Transcript(session=f"{turn.session}>{target}", parent=self._caller)
        result = await run_tool_call_loop(execution, transcript, task, approver=turn.approver, actor=turn.actor)
        if result.stop is not StopReason.COMPLETED:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"{target} did not finish ({result.stop.value}): {result.text}")
        return result.text or f"({target} gave no answer)"


def delegation_reach(config: Config, agent: str) -> tuple[str, ...]:
    """Return the agents `agent`'s turns can delegate to, transitively within the depth limit.

    Callers outside the daemon open what these need (MCP servers, the memory store) before
    a turn; an agent without the grant reaches nobody. Unknown names reach nobody.
    """
    reach: dict[str, None] = {}
    frontier = [agent]
    for _ in range(config.daemon.max_delegation_depth):
        following: list[str] = []
        for name in frontier:
            policy = config.agents.get(name)
            if policy is None or DELEGATE_TOOL_NAME not in policy.tools or DELEGATE_TOOL_NAME in policy.excluded_tools:
                continue
            for target in policy.delegates:
                if target not in reach and target != agent:
                    reach[target] = None
                    following.append(target)
        frontier = following
    return tuple(reach)
