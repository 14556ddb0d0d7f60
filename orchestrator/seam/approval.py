"""ApprovalManager: one agent's approval rules under one surface's interactivity (seam-minted)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

from loguru import logger

from orchestrator.config import Autonomy
from orchestrator.errors import SealViolation
from orchestrator.policy import (
    ApprovalArguments,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    AuditSink,
    Interactivity,
    Verdict,
    approval_rule,
)
from orchestrator.seam._seal import SEAL, sealed_class, vouch
from orchestrator.tools import ToolSpec

__all__ = ["ApprovalManager"]

_ALLOWED = ApprovalDecision(verdict=Verdict.APPROVED, decided_by="policy", reason="allowed by policy")


@sealed_class("ApprovalManager")
class ApprovalManager:
    """Decides whether one tool call may run; fails closed on every error path."""

    __slots__ = ("__weakref__", "agent", "always_ask", "audit", "auto_approve", "autonomy", "interactivity", "timeout_s")

    agent: str
    autonomy: Autonomy
    auto_approve: tuple[str, ...]
    always_ask: tuple[str, ...]
    timeout_s: float
    interactivity: Interactivity
    audit: AuditSink | None

    def __init__(
        self,
        *,
        agent: str,
        autonomy: Autonomy,
        auto_approve: tuple[str, ...],
        always_ask: tuple[str, ...],
        timeout_s: float,
        interactivity: Interactivity,
        audit: AuditSink | None,
        seal: object,
    ) -> None:
        if seal is not SEAL:
            raise SealViolation("ApprovalManager")
        for name, value in (
            ("agent", agent),
            ("autonomy", autonomy),
            ("auto_approve", auto_approve),
            ("always_ask", always_ask),
            ("timeout_s", timeout_s),
            ("interactivity", interactivity),
            ("audit", audit),
        ):
            object.__setattr__(self, name, value)
        vouch(self)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ApprovalManager is immutable")

    def rule_for(self, spec: ToolSpec) -> ApprovalRule:
        """Return what policy says about `spec` before anyone is asked."""
        return approval_rule(
            tool=spec.name,
            read_only=spec.read_only,
            autonomy=self.autonomy,
            auto_approve=self.auto_approve,
            always_ask=self.always_ask,
        )

    def describe(self) -> dict[str, object]:
        """Return the rules as plain data (for parity checks and `orchestrator policy`)."""
        return {
            "autonomy": self.autonomy,
            "auto_approve": list(self.auto_approve),
            "always_ask": list(self.always_ask),
            "timeout_s": self.timeout_s,
            "interactivity": self.interactivity.value,
        }

    async def authorize(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any],
        *,
        session: str,
        approver: Approver | None,
    ) -> ApprovalDecision:
        """Return the decision for one call; nobody deciding is never an approval."""
        rule = self.rule_for(spec)
        if rule is ApprovalRule.ALLOW:
            return _ALLOWED
        request = ApprovalRequest(
            request_id=uuid.uuid4().hex[:8],
            agent=self.agent,
            session=session,
            tool=spec.name,
            arguments=arguments,
            timeout_s=self.timeout_s,
            shown=ApprovalArguments.of(arguments, spec.parameters),
        )
        if rule is ApprovalRule.DENY:
            decision = ApprovalDecision(
                verdict=Verdict.DENIED,
                decided_by="policy",
                reason=f"autonomy {self.autonomy!r} allows only read-only tools",
            )
        elif self.interactivity is Interactivity.NON_INTERACTIVE or approver is None:
            decision = ApprovalDecision(
                verdict=Verdict.NO_DECISION,
                decided_by=None,
                reason="this surface has no operator to ask",
            )
        else:
            decision = await self._ask(approver, request)
        self._record(request, decision, rule)
        return decision

    async def confirm(
        self, action: str, details: Mapping[str, Any], *, session: str, approver: Approver | None
    ) -> ApprovalDecision:
        """Ask a human to confirm `action` whatever the autonomy (an SOP step); audited.

        Without an operator (non-interactive surface, no approver, timeout) the answer is
        NO_DECISION, which callers must treat as "do not run".
        """
        request = ApprovalRequest(
            request_id=uuid.uuid4().hex[:8],
            agent=self.agent,
            session=session,
            tool=action,
            arguments=details,
            timeout_s=self.timeout_s,
            shown=ApprovalArguments.of(details),
        )
        if self.interactivity is Interactivity.NON_INTERACTIVE or approver is None:
            decision = ApprovalDecision(
                verdict=Verdict.NO_DECISION, decided_by=None, reason="this surface has no operator to ask"
            )
        else:
            decision = await self._ask(approver, request)
        self._record(request, decision, ApprovalRule.ASK)
        return decision

    async def _ask(self, approver: Approver, request: ApprovalRequest) -> ApprovalDecision:
        try:
            async with asyncio.timeout(self.timeout_s):
                decision = await approver(request)
        except TimeoutError:
            return ApprovalDecision(
                verdict=Verdict.NO_DECISION,
                decided_by=None,
                reason=f"nobody answered within {self.timeout_s:g}s",
                asked=True, timed_out=True,
            )
        except Exception as exc:  # an approver bug must deny, not crash the turn
            logger.opt(exception=exc).warning("approver failed for {}", request.tool)
            return ApprovalDecision(
                verdict=Verdict.NO_DECISION, decided_by=None, reason="the approval prompt failed", asked=True
            )
        return decision if decision.asked else dataclasses.replace(decision, asked=True)

    def _record(self, request: ApprovalRequest, decision: ApprovalDecision, rule: ApprovalRule) -> None:
        if self.audit is None:
            return
        try:
            self.audit.record_approval(request, decision, rule=rule)
        except Exception as exc:  # auditing must not turn a denial into a crash
            logger.opt(exception=exc).error("approval audit write failed")
