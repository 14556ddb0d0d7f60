"""CurrentTurn: what a running turn exposes to the seam tools it calls (deadline, iterations, approver).

The engine sets it (a context variable) for the duration of `run_tool_call_loop`, so the
seam's delegation policy can cap a nested turn by what is left of its caller's budgets,
and the `delegate` tool can run that nested turn through `run_child`, without the engine
knowing any tool by name and without the seam or the tools importing the engine.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from orchestrator.policy import Approver
    from orchestrator.seam.execution import ResolvedAgentExecution
    from orchestrator.tools import ChildOutcome

__all__ = ["ChildRunner", "CurrentTurn", "current_turn", "enter_turn", "leave_turn"]


class ChildRunner(Protocol):
    """The engine's way to run a nested turn inside the current one."""

    async def __call__(
        self, execution: ResolvedAgentExecution, task: str, /, *, session: str, parent: str
    ) -> ChildOutcome: ...


@dataclass(slots=True, kw_only=True, eq=False)
class CurrentTurn:
    """The turn a tool call belongs to; `iteration` advances as the turn runs."""

    execution: ResolvedAgentExecution
    session: str
    approver: Approver | None
    actor: str | None
    deadline: float  # event-loop time at which the turn's time budget runs out
    depth: int  # 0 for a top-level turn; a turn run inside another's tool call is one deeper
    runner: ChildRunner
    iteration: int = 0
    tokens: int = 0  # model tokens the turn has used so far (the engine adds each call's)
    # the turn whose tool call runs this one (a delegation), or None for a top-level turn
    caller: CurrentTurn | None = None

    def remaining_s(self) -> float:
        """Return the seconds left before the turn's deadline (never negative)."""
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def remaining_iterations(self) -> int:
        """Return the tool iterations the turn may still start (never negative)."""
        return max(0, self.execution.knobs.max_tool_iterations - self.iteration)

    def remaining_tokens(self) -> int:
        """Return the model tokens the turn may still use (never negative)."""
        return max(0, self.execution.knobs.max_tokens_per_turn - self.tokens)

    async def run_child(self, execution: ResolvedAgentExecution, task: str, *, session: str, parent: str) -> ChildOutcome:
        """Run `task` on `execution` (resolved by the seam) as a nested turn, with this turn's approver and actor."""
        return await self.runner(execution, task, session=session, parent=parent)


_current: ContextVar[CurrentTurn | None] = ContextVar("orchestrator_current_turn", default=None)


def current_turn() -> CurrentTurn | None:
    """Return the turn the calling code runs inside, or None outside any turn."""
    return _current.get()


def enter_turn(turn: CurrentTurn) -> Token[CurrentTurn | None]:
    """Make `turn` current (the engine calls this); undo with `leave_turn`."""
    return _current.set(turn)


def leave_turn(token: Token[CurrentTurn | None]) -> None:
    """Restore the turn that was current before `enter_turn`."""
    _current.reset(token)
