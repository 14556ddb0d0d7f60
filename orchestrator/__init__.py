"""A chat-channel agent daemon whose agent policy is resolved in exactly one place.

`import orchestrator` stays light: `orchestrator.Agent` and `orchestrator.Attachment` (the
library API) are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.library import Agent, Attachment

__all__ = ["Agent", "Attachment"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from orchestrator import library

        return getattr(library, name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
