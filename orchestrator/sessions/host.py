"""TurnHost: what a service that runs turns inside the daemon needs of it (the daemon's `Runtime` is one)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from orchestrator.config import Config
from orchestrator.seam import Services
from orchestrator.sessions.runner import Sessions, Turn

__all__ = ["TurnHost"]


class TurnHost(Protocol):
    """The config generation, services and sessions a turn runs with, and the drain's count.

    The gateway and the scheduler each extend it with what else they need, so neither imports
    the daemon package.
    """

    @property
    def config(self) -> Config: ...

    @property
    def services(self) -> Services: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def accepting(self) -> bool: ...

    def counting(self, turn: Turn) -> AbstractAsyncContextManager[None]: ...
