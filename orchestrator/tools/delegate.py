"""The `delegate` tool: hand a task to another agent and return its final answer.

The tool only carries out what the seam resolved: the seam decides whether an agent holds
the grant, which targets it may name, the depth limit and the ceilings, and resolves the
target on its own policy (`Delegation.start`); the nested turn then runs through the
calling turn (`CurrentTurn.run_child`, which the engine provides), so this module imports
neither the seam nor the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Protocol, cast

from pydantic import Field, create_model

from orchestrator.errors import ToolFailure
from orchestrator.tools.base import ToolSource, ToolSpec
from orchestrator.tools.contract import NonBlank, ToolArguments
from orchestrator.tools.reserved import DELEGATE_TOOL_NAME

__all__ = ["ChildOutcome", "ChildTurn", "DelegateArguments", "DelegateTool", "Delegation", "delegate_arguments"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """How a delegated turn ended: `stop` is the engine's stop reason, `text` its reply."""

    completed: bool
    stop: str
    text: str


class ChildTurn(Protocol):
    """One delegated task the seam has resolved, bound to the calling turn."""

    async def run(self, task: str) -> ChildOutcome:
        """Run `task` as a nested turn on a fresh transcript that holds only the task."""
        ...


class Delegation(Protocol):
    """The seam's decision for one caller: whom it may delegate to, and how a call starts."""

    @property
    def caller(self) -> str: ...

    @property
    def targets(self) -> tuple[str, ...]: ...

    def start(self, target: str) -> ChildTurn:
        """Resolve `target` for the calling turn; raises ToolFailure when the policy refuses."""
        ...


class DelegateArguments(ToolArguments):
    """The `delegate` tool's arguments; `delegate_arguments` narrows `agent` to one caller's targets."""

    agent: str = Field(description="who does the task")
    task: NonBlank = Field(description="everything the agent needs to know")


@cache
def delegate_arguments(caller: str, targets: tuple[str, ...]) -> type[DelegateArguments]:
    """Return the `delegate` contract for `caller`: `agent` is one of `targets` (at least one)."""
    if not targets:
        raise ValueError(f"agent {caller!r} has no agent to delegate to")
    allowed = ", ".join(targets)

    def refused(value: object) -> str:
        return f"{value!r} is not an agent {caller} may delegate to (allowed: {allowed})"

    return create_model(
        "DelegateArguments",
        __base__=DelegateArguments,
        __doc__=DelegateArguments.__doc__,
        agent=(Literal[targets], Field(description="who does the task")),  # type: ignore[arg-type]
        refusals=(ClassVar[Mapping[tuple[str, str], Callable[[Any], str]]], MappingProxyType({
            ("agent", "literal_error"): refused, ("agent", "string_type"): refused,
        })),
    )


class DelegateTool:
    """Runs one task on a target agent and returns the target's final text."""

    __slots__ = ("_delegation", "spec")

    def __init__(self, *, delegation: Delegation) -> None:
        self._delegation = delegation
        self.spec = ToolSpec(
            name=DELEGATE_TOOL_NAME,
            description=(
                "Hand a self-contained task to another agent and get its final answer back. "
                "The other agent sees only the task text you write, not this conversation."
            ),
            contract=delegate_arguments(delegation.caller, delegation.targets),
            read_only=False,  # the target may write under its own policy
            source=ToolSource.SEAM,
        )

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Run the task on the target; raises ToolFailure when it may not or did not finish."""
        contract = cast("type[DelegateArguments]", self.spec.contract)
        checked = contract.parse(DELEGATE_TOOL_NAME, arguments)
        target, task = checked.agent, checked.task
        outcome = await self._delegation.start(target).run(task)
        if not outcome.completed:
            raise ToolFailure(DELEGATE_TOOL_NAME, f"{target} did not finish ({outcome.stop}): {outcome.text}")
        return outcome.text or f"({target} gave no answer)"
