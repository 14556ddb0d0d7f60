"""A chat-channel agent daemon whose agent policy is resolved in exactly one place.

`import orchestrator` stays light: `orchestrator.Agent` (the library API) is imported on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.library import Agent

__all__ = ["Agent"]


def __getattr__(name: str) -> Any:
    if name == "Agent":
        from orchestrator.library import Agent

        return Agent
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
