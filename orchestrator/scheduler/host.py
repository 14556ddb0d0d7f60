"""ScheduleHost: what schedules need of the daemon they run in (the daemon's `Runtime` is one)."""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from channels import ChannelAdapter
from orchestrator.config import Config
from orchestrator.seam import Services
from orchestrator.sessions import Sessions, Turn

__all__ = ["ScheduleHost"]

_T = TypeVar("_T")


class _Channels(Protocol):
    def adapter(self, name: str) -> ChannelAdapter | None: ...


class ScheduleHost(Protocol):
    """The config generation, services, sessions and task group a schedule run uses."""

    @property
    def config(self) -> Config: ...

    @property
    def services(self) -> Services: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def channels(self) -> _Channels: ...

    @property
    def accepting(self) -> bool: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> object: ...

    def in_flight(self) -> AbstractAsyncContextManager[None]: ...

    def counting(self, turn: Turn) -> AbstractAsyncContextManager[None]: ...

    async def enter_async_context(self, component: AbstractAsyncContextManager[_T]) -> _T: ...
