"""The bounded label values the metrics and spans use: provider error classes, turn outcomes, approvals."""

from __future__ import annotations

from typing import Final

from orchestrator.errors import ProviderError, ProviderUnavailable
from orchestrator.policy import ApprovalDecision, ApprovalRule, Verdict
from orchestrator.sessions import Turn

__all__ = ["NO_CHANNEL", "approval_outcome", "provider_error_class", "turn_channel", "turn_outcome"]

# The `channel` label of a turn no chat channel started (gateway, schedule, ACP, library).
NO_CHANNEL: Final = "-"
_CHANNEL_PATH: Final = "channel"


def provider_error_class(exc: BaseException) -> str:
    """Return the class of a provider failure, from its structured fields only (never its text).

    `timeout`, `connection`, `rate_limited` (429), `overloaded` (503, 529), `server_error`
    (other 5xx), `auth` (401, 403), `not_found` (404), `bad_request` (other 4xx), `bad_response`
    (an answer that could not be read), `unusable` (not a provider error: it could not be built).
    """
    if not isinstance(exc, ProviderError):
        return "unusable"
    status = exc.status
    if status is None:
        if isinstance(exc, ProviderUnavailable):
            return "timeout" if exc.timed_out else "connection"
        return "bad_response"
    if status == 429:
        return "rate_limited"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    return "bad_request"


def turn_channel(turn: Turn) -> str:
    """Return the chat channel a turn came from (the session key's first part), or `-`."""
    execution = turn.execution
    if execution is None or execution.identity.path.value != _CHANNEL_PATH:
        return NO_CHANNEL
    return turn.key.partition(":")[0]


def turn_outcome(turn: Turn, failure: BaseException | None) -> str:
    """Return why a turn ended: its stop reason, `stopped` (/stop), `cancelled` or `failed`."""
    if failure is not None:  # CancelledError is no Exception: the daemon stopping, not a bug
        return "failed" if isinstance(failure, Exception) else "cancelled"
    return "stopped" if turn.result is None else turn.result.stop.value


def approval_outcome(decision: ApprovalDecision, rule: ApprovalRule) -> str:
    """Return `granted`, `denied`, `timed_out`, `no_decision`, `policy_denied` or `no_operator`."""
    if rule is ApprovalRule.DENY:
        return "policy_denied"
    if not decision.asked:
        return "no_operator"
    if decision.verdict is Verdict.APPROVED:
        return "granted"
    if decision.verdict is Verdict.DENIED:
        return "denied"
    return "timed_out" if decision.timed_out else "no_decision"
