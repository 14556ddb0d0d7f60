"""Policy primitives: security limits, the tool filter and approval semantics."""

from orchestrator.policy.approval_text import APPROVAL_PREVIEW_CHARS, ApprovalArguments, render_arguments
from orchestrator.policy.printable import shown_name
from orchestrator.policy.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    AuditSink,
    Interactivity,
    Verdict,
    approval_rule,
)
from orchestrator.policy.sandbox import SANDBOX_KINDS, SandboxKind, SandboxLimits, SandboxRequest, ShellSandbox
from orchestrator.policy.security import SecurityPolicy
from orchestrator.policy.tool_filter import is_granted, matches_any

__all__ = [
    "APPROVAL_PREVIEW_CHARS",
    "ApprovalArguments",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "AuditSink",
    "Interactivity",
    "SANDBOX_KINDS",
    "SandboxKind",
    "SandboxLimits",
    "SandboxRequest",
    "SecurityPolicy",
    "ShellSandbox",
    "Verdict",
    "approval_rule",
    "is_granted",
    "matches_any",
    "render_arguments",
    "shown_name",
]
