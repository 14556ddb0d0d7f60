"""run_sop(): run one SOP's steps in order, each a fresh turn of its step agent.

Every step is resolved on the SOP_STEP path for its own agent (tools, approval rules under
the parent surface's interactivity, MCP scope, provider, temperature, budgets), with the
step's `tools` as `caller_allowed`. It runs on a child transcript holding the step prompt
and the previous step's output, never the conversation the SOP was started from. A step
that cannot be assembled, is not confirmed, or does not finish stops the SOP there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from loguru import logger

from orchestrator.config import Config
from orchestrator.engine import StopReason, Transcript
from orchestrator.errors import OrchestratorError
from orchestrator.policy import Approver, Interactivity, Verdict
from orchestrator.seam import Services, build_sop_step
from orchestrator.sessions import Sessions

__all__ = ["SopResult", "SopStatus", "StepOutcome", "UnknownSop", "run_sop", "sop_agents"]


class UnknownSop(OrchestratorError):
    """A start named an SOP the config does not define."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name, self.known = name, known
        super().__init__(f"unknown SOP {name!r} (known: {', '.join(known) or 'none'})")


class SopStatus(enum.Enum):
    """How an SOP (or one step) ended."""

    COMPLETED = "completed"
    STOPPED = "stopped"  # a confirmation was refused or nobody could be asked
    FAILED = "failed"  # a step could not be assembled or its turn did not finish


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOutcome:
    """One step that was attempted: its 1-based index, agent and result text."""

    index: int
    agent: str
    status: SopStatus
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SopResult:
    """What an SOP produced: the last step's output and one line on how it ended."""

    sop: str
    status: SopStatus
    output: str
    message: str
    steps: tuple[StepOutcome, ...]


def sop_agents(config: Config, name: str) -> tuple[str, ...]:
    """Return the agents `name`'s steps run as, in order of first use (raises UnknownSop)."""
    sop = config.sops.get(name)
    if sop is None:
        raise UnknownSop(name, sorted(config.sops))
    return tuple(dict.fromkeys(step.agent or sop.agent for step in sop.steps))


async def run_sop(
    config: Config,
    name: str,
    *,
    services: Services,
    sessions: Sessions,
    approver: Approver | None = None,
    interactivity: Interactivity = Interactivity.NON_INTERACTIVE,
    context: str = "",
    initiator: str | None = None,
    actor: str | None = None,
    session: str = "sop",
) -> SopResult:
    """Run SOP `name` and return how it ended; raises UnknownSop for a name the config lacks.

    Each step is a child turn of `sessions` (`Sessions.run_child`), so every hook that
    watches its turns (metrics, traces) sees the steps too.

    `approver` and `interactivity` are the starting surface's (a schedule passes neither:
    steps needing confirmation then stop the SOP). `initiator` is the parent correlation
    stamped on every step (default: the SOP's agent); `context` goes to the first step;
    `session` prefixes the child transcripts' ids (the chat session, for a channel start).
    """
    sop = config.sops.get(name)
    if sop is None:
        raise UnknownSop(name, sorted(config.sops))
    parent = initiator or sop.agent
    previous = context.strip()
    outcomes: list[StepOutcome] = []

    def finish(status: SopStatus, message: str) -> SopResult:
        logger.info("sop {}: {}", name, message)
        output = outcomes[-1].text if outcomes and outcomes[-1].status is SopStatus.COMPLETED else ""
        return SopResult(sop=name, status=status, output=output, message=message, steps=tuple(outcomes))

    for index, step in enumerate(sop.steps, start=1):
        agent = step.agent or sop.agent
        label = f"SOP {name!r} step {index} ({agent})"
        try:
            execution = build_sop_step(
                config, agent, services, parent=parent, interactivity=interactivity, step_tools=step.tools
            )
        except Exception as exc:  # fail closed: a step never runs with anything but its own contract
            logger.opt(exception=exc).error("{}: cannot be assembled", label)
            outcomes.append(StepOutcome(index=index, agent=agent, status=SopStatus.FAILED, text=str(exc)))
            return finish(SopStatus.FAILED, f"{label} cannot be assembled ({exc}); the SOP stopped before it")
        transcript = Transcript(session=f"{session}/sop:{name}:{index}", parent=parent)
        if step.requires_confirmation:
            decision = await execution.approvals.confirm(
                f"sop:{name}:step{index}", {"agent": agent, "prompt": step.prompt},
                session=transcript.session, approver=approver,
            )
            if decision.verdict is not Verdict.APPROVED:
                outcomes.append(StepOutcome(index=index, agent=agent, status=SopStatus.STOPPED, text=""))
                who = f"refused by {decision.decided_by}" if decision.verdict is Verdict.DENIED else "nobody confirmed it"
                return finish(
                    SopStatus.STOPPED, f"{label} needs confirmation and {who} ({decision.reason}); the SOP stopped there"
                )
        turn = await sessions.run_child(
            transcript, agent=agent, execution=execution,
            text=_step_message(step.prompt, previous, first=index == 1), approver=approver, actor=actor,
        )
        result = turn.completed()
        if result.stop is not StopReason.COMPLETED:
            outcomes.append(StepOutcome(index=index, agent=agent, status=SopStatus.FAILED, text=result.text))
            return finish(SopStatus.FAILED, f"{label} did not finish ({result.stop.value}): {result.text}")
        outcomes.append(StepOutcome(index=index, agent=agent, status=SopStatus.COMPLETED, text=result.text))
        previous = result.text
    return finish(SopStatus.COMPLETED, f"completed {len(outcomes)} step(s)")


def _step_message(prompt: str, previous: str, *, first: bool) -> str:
    # The only context a step sees: its prompt plus the previous step's output (or, for the
    # first step, the context its starter gave). Never the conversation it was started from.
    if not previous:
        return prompt
    heading = "Context given when the procedure was started:" if first else "Output of the previous step:"
    return f"{prompt}\n\n{heading}\n{previous}"
