"""The delegation policy: who may delegate to whom, how deep, and under which ceilings.

Granted only when an agent names `delegate` in `tools` and lists targets in `delegates`;
the model can name only those targets. Each call re-enters `resolve()` for the target on
the DELEGATE path (never reusing the caller's registry), capped by what is left of the
caller's turn, and never started once a day it would spend (the caller's, or any caller's
up the chain, with the same sender) is spent; the engine charges its calls to those days
as well as its own (`seam.usage.day_budgets`). The tool (`orchestrator.tools.delegate`)
then runs it through the calling turn on a fresh child transcript that holds only the
task text the caller wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from loguru import logger

from orchestrator.errors import OrchestratorError, ToolFailure
from orchestrator.seam.turn_scope import CurrentTurn, current_turn
from orchestrator.seam.usage import day_budgets
from orchestrator.tools import DELEGATE_TOOL_NAME, ChildOutcome, DelegateTool, Tool

if TYPE_CHECKING:
    from orchestrator.config import AgentConfig, Config
    from orchestrator.seam.execution import ResolvedAgentExecution
    from orchestrator.seam.services import Services

__all__ = ["delegate_tools", "delegation_reach"]

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
    delegation = _SeamDelegation(config=config, caller=agent_name, targets=tuple(agent.delegates), services=services)
    return {DELEGATE_TOOL_NAME: DelegateTool(delegation=delegation)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _SeamDelegation:
    """One caller's delegation grant; `start` decides each call (the tool's `Delegation`)."""

    config: Config
    caller: str
    targets: tuple[str, ...]
    services: Services

    def start(self, target: str) -> _ChildTurn:
        """Resolve `target` on the DELEGATE path under the calling turn's ceilings."""
        from orchestrator.seam.execution import RuntimeKnobs
        from orchestrator.seam.path_builders import build_delegate

        turn = current_turn()
        if turn is None or turn.execution.identity.agent != self.caller:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"can only be called inside a turn of {self.caller!r}")
        limit = self.config.daemon.max_delegation_depth
        if turn.depth + 1 > limit:
            raise ToolFailure(
                DELEGATE_TOOL_NAME, f"the delegation depth limit ({limit}) is reached; do the task without delegating"
            )
        caller = turn.execution
        # One ledger per (agent, sender): a caller whose day is spent does not start a delegate.
        for day in day_budgets(caller, turn.actor, turn.caller):
            spent = caller.usage.spent_today(day.key)
            if spent >= day.limit:
                raise ToolFailure(
                    DELEGATE_TOOL_NAME,
                    f"the daily token budget of {day.limit} tokens for {day.agent!r} is spent "
                    f"({spent} used in the last 24 hours); {target!r} was not started",
                )
        # The engine also bounds this call by the caller's tool timeout: the child cannot outlive it.
        time_left = min(turn.remaining_s(), caller.knobs.tool_timeout_s)
        ceiling = RuntimeKnobs(
            max_tool_iterations=turn.remaining_iterations(),
            turn_timeout_s=time_left,
            tool_timeout_s=time_left,
            max_tool_result_chars=caller.knobs.max_tool_result_chars,
            max_history_messages=_UNCAPPED,
            max_actions_per_hour=_UNCAPPED,
            # the child's tokens come out of the caller's turn: it gets what is left of it
            max_tokens_per_turn=max(turn.remaining_tokens(), 1),
            max_tokens_per_day=_UNCAPPED,
        )
        try:
            execution = build_delegate(
                self.config, target, self.services,
                parent=self.caller, interactivity=caller.approvals.interactivity, ceiling=ceiling,
            )
        except OrchestratorError as exc:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"cannot start {target!r}: {exc}") from exc
        logger.info("{} delegates to {} (depth {})", self.caller, target, turn.depth + 1)
        return _ChildTurn(turn=turn, execution=execution, session=f"{turn.session}>{target}", parent=self.caller)


@dataclass(frozen=True, slots=True, kw_only=True)
class _ChildTurn:
    turn: CurrentTurn
    execution: ResolvedAgentExecution
    session: str
    parent: str

    async def run(self, task: str) -> ChildOutcome:
        """Run the task through the calling turn (the engine's `run_child`)."""
        return await self.turn.run_child(self.execution, task, session=self.session, parent=self.parent)


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
