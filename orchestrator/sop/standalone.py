"""run_sop_standalone(): an SOP outside the daemon (`orchestrator sop`), opening what its steps need."""

from __future__ import annotations

from orchestrator.config import Config
from orchestrator.policy import Approver, Interactivity
from orchestrator.seam import ConstructionPath, open_services
from orchestrator.sessions import MemoryTranscripts, Sessions
from orchestrator.sop.runner import SopResult, run_sop, sop_agents

__all__ = ["run_sop_standalone"]


async def run_sop_standalone(
    config: Config,
    name: str,
    *,
    context: str = "",
    approver: Approver | None = None,
    interactivity: Interactivity = Interactivity.NON_INTERACTIVE,
    actor: str | None = None,
) -> SopResult:
    """Open what the steps (and every agent they can delegate to) need; run; close.

    The seam's `open_services` decides what that is (the audit log, the memory store and
    MCP servers only when a reached agent uses them, the serial pool); raises UnknownSop
    before opening anything.
    """
    sop_agents(config, name)  # UnknownSop before anything is opened
    async with open_services(config, (), ConstructionPath.SOP_STEP, sops=[name]) as services:
        return await run_sop(
            config, name, services=services, sessions=Sessions(transcripts=MemoryTranscripts(prefix="sop:")),
            approver=approver, interactivity=interactivity,
            context=context, actor=actor,
        )
