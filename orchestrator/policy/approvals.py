"""Approval semantics: which calls need a human, and what the model is told when none decides."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.policy.approval_text import APPROVAL_PREVIEW_CHARS, ApprovalArguments
from orchestrator.policy.tool_filter import matches_any

if TYPE_CHECKING:
    from orchestrator.config import Autonomy

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "AuditSink",
    "Interactivity",
    "Verdict",
    "approval_rule",
]


class Interactivity(enum.Enum):
    """How a surface can reach a human for an approval."""

    INTERACTIVE = "interactive"
    CHANNEL_PROMPT = "channel_prompt"
    NON_INTERACTIVE = "non_interactive"


class ApprovalRule(enum.Enum):
    """What policy says about one tool before anyone is asked."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Verdict(enum.Enum):
    """The outcome of one approval."""

    APPROVED = "approved"
    DENIED = "denied"
    NO_DECISION = "no_decision"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One tool call waiting for a human."""

    request_id: str
    agent: str
    session: str
    tool: str
    arguments: Mapping[str, Any]
    timeout_s: float
    # what the approver is shown: every argument in full, in the tool's schema order; each
    # surface fits it to its own room (`ApprovalArguments.fit`)
    shown: ApprovalArguments

    @property
    def preview(self) -> str:
        """Return the arguments as one line of at most `APPROVAL_PREVIEW_CHARS` (the CLI's prompt)."""
        return self.shown.fit(APPROVAL_PREVIEW_CHARS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A decision and who made it (None when nobody did)."""

    verdict: Verdict
    decided_by: str | None
    reason: str
    # whether the surface's approver was asked at all, and whether it gave no answer in time
    asked: bool = False
    timed_out: bool = False

    def model_message(self, tool: str) -> str:
        """Return what the model is told; 'nobody decided' differs from 'a user refused'."""
        if self.verdict is Verdict.DENIED:
            who = self.decided_by or "policy"
            return f"Tool call {tool!r} was refused by {who}: {self.reason}. It was not run."
        return (
            f"Tool call {tool!r} was not run: it needs approval and no operator decided "
            f"({self.reason}). Do not assume the user refused; carry on without it."
        )


class Approver(Protocol):
    """Asks a human; must return NO_DECISION rather than raise when nobody answers."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision: ...


class AuditSink(Protocol):
    """Receives every approval decision (SQLite in production)."""

    def record_approval(
        self, request: ApprovalRequest, decision: ApprovalDecision, *, rule: ApprovalRule
    ) -> None: ...


def approval_rule(
    *,
    tool: str,
    read_only: bool,
    autonomy: Autonomy,
    auto_approve: tuple[str, ...],
    always_ask: tuple[str, ...],
) -> ApprovalRule:
    """Return the rule for one tool under one agent's approval settings (fail closed)."""
    if autonomy == "read_only" and not read_only:
        return ApprovalRule.DENY
    if matches_any(tool, always_ask):
        return ApprovalRule.ASK
    if autonomy in ("full", "read_only"):
        return ApprovalRule.ALLOW
    return ApprovalRule.ALLOW if matches_any(tool, auto_approve) else ApprovalRule.ASK
