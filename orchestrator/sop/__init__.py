"""SOPs: ordered agent steps, each re-assembled through the seam for its own agent."""

from orchestrator.sop.runner import SopResult, SopStatus, StepOutcome, UnknownSop, run_sop, sop_agents
from orchestrator.sop.standalone import run_sop_standalone

__all__ = [
    "SopResult",
    "SopStatus",
    "StepOutcome",
    "UnknownSop",
    "run_sop",
    "run_sop_standalone",
    "sop_agents",
]
