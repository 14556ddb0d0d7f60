"""ScheduleHost: what schedules need of the daemon they run in (the daemon's `Runtime` is one)."""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from channels import ChannelAdapter
from orchestrator.sessions import TurnHost

__all__ = ["ScheduleHost"]

_T = TypeVar("_T")


class _Channels(Protocol):
    def adapter(self, name: str) -> ChannelAdapter | None: ...


class ScheduleHost(TurnHost, Protocol):
    """What a schedule run needs beyond a turn's host: channels to deliver to, the task group, the exit stack."""

    @property
    def channels(self) -> _Channels: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> object: ...

    def in_flight(self) -> AbstractAsyncContextManager[None]: ...

    async def enter_async_context(self, component: AbstractAsyncContextManager[_T]) -> _T: ...
