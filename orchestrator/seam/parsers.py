"""How an agent's uploaded documents are parsed: the confinement and limits of the parser child."""

from __future__ import annotations

from orchestrator.config import AgentConfig
from orchestrator.media import ParserLimits
from orchestrator.policy import SandboxKind
from orchestrator.tools import bwrap_error, landlock_error

__all__ = ["parser_limits", "parser_sandbox"]


def parser_sandbox() -> SandboxKind:
    """Return the strongest sandbox this host has for a parser child (network always off).

    bwrap, else Landlock, else "none": the child's limits alone. The agent's shell sandbox
    plays no part: a shell refused, or written `none`, never gives a parser less.
    """
    if bwrap_error() is None:
        return "bwrap"
    if landlock_error(False) is None:
        return "landlock"
    return "none"


def parser_limits(agent: AgentConfig) -> ParserLimits:
    """Return `[agents.X.media]`'s `pdf_*` limits under `parser_sandbox()`."""
    media = agent.media
    return ParserLimits(
        sandbox=parser_sandbox(),
        timeout_s=media.pdf_timeout_s,
        cpu_seconds=media.pdf_cpu_s,
        memory_bytes=media.pdf_memory_mb * 2**20,
    )
