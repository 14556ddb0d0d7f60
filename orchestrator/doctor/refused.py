"""The one error a probe raises when a platform or provider could not be asked, or refused."""

from __future__ import annotations

from orchestrator.errors import OrchestratorError

__all__ = ["ProbeRefused"]


class ProbeRefused(OrchestratorError):
    """The endpoint could not be asked, or refused; `reason` says why and what to change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
