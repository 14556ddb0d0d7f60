"""ChannelSet: the daemon's channels, each a supervised adapter with one explicit state."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from loguru import logger

from channels import ChannelAdapter, ChannelEnded, ChannelError, Deliver, supervise
from orchestrator.config import ChannelConfig

__all__ = ["Channel", "ChannelSet", "ChannelState", "ChannelStatus"]

class ChannelState(enum.Enum):
    """Where a channel is in its life."""

    STARTING = "starting"  # connecting (or reconnecting before it was ever ready)
    READY = "ready"  # receiving (a later reconnect keeps it READY: the supervisor retries)
    FAILED = "failed"  # refused for good (bad credentials): not retried
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelStatus:
    """What `/health` and the ready line show of one channel."""

    kind: str
    ready: bool
    error: str | None


class Channel:
    """One channel: its settings, adapter, state and supervising task; only `ChannelSet` makes one."""

    def __init__(
        self, *, name: str, settings: ChannelConfig, adapter: ChannelAdapter, on_ended: Callable[[str], None]
    ) -> None:
        self.name = name
        self._on_ended = on_ended
        self.settings = settings
        self.adapter = adapter
        self._state = ChannelState.STARTING
        self._error: BaseException | None = None
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._leases = 0  # streamed replies still going through this adapter (see `ChannelSet.lease`)
        self._retired = False  # stopped while leased: its adapter closes at the last release

    @property
    def kind(self) -> str:
        """Return the adapter kind (`telegram`, `terminal`, ...)."""
        return self.settings.kind

    @property
    def retired(self) -> bool:
        """Return True once the channel was stopped (a reload restarted it) while a lease held its adapter."""
        return self._retired

    @property
    def state(self) -> ChannelState:
        """Return the current state."""
        return self._state

    @property
    def error(self) -> BaseException | None:
        """Return why the channel FAILED (None otherwise)."""
        return self._error

    def status(self) -> ChannelStatus:
        """Return the channel's status row."""
        return ChannelStatus(
            kind=self.kind,
            ready=self._state is ChannelState.READY,
            error=str(self._error) if self._error is not None else None,
        )

    def _ready(self) -> None:
        if self._state is ChannelState.STARTING:
            self._state = ChannelState.READY
        self._settled.set()

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, ChannelEnded):  # closed by its person: stopped, not failed
            self._state = ChannelState.STOPPED
            self._settled.set()
            self._on_ended(self.name)
            return
        self._state, self._error = ChannelState.FAILED, exc
        self._settled.set()

    def _stopped(self) -> None:
        if self._state is not ChannelState.FAILED:
            self._state = ChannelState.STOPPED
        self._settled.set()


class ChannelSet:
    """The running channels by name; their supervising tasks run in the runtime's TaskGroup."""

    def __init__(self, *, spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[None]]) -> None:
        self._spawn = spawn
        self._channels: dict[str, Channel] = {}
        # channels their person closed (Ctrl-D on the terminal), in order; `ended` is set at each
        self.closed_by_user: list[str] = []
        self.ended = asyncio.Event()
        self._retired: list[Channel] = []  # stopped, their adapters kept open for leased streams

    def __iter__(self) -> Iterator[str]:
        return iter(self._channels)

    def __len__(self) -> int:
        return len(self._channels)

    def __contains__(self, name: object) -> bool:
        return name in self._channels

    def get(self, name: str) -> Channel | None:
        """Return channel `name` (in any state), or None when it is not in the set."""
        return self._channels.get(name)

    def adapter(self, name: str) -> ChannelAdapter | None:
        """Return the adapter of channel `name` unless the channel is gone or FAILED."""
        channel = self._channels.get(name)
        if channel is None or channel.state is ChannelState.FAILED:
            return None
        return channel.adapter

    def status(self) -> dict[str, ChannelStatus]:
        """Return every channel's status, by name in order."""
        return {name: self._channels[name].status() for name in sorted(self._channels)}

    def failures(self) -> dict[str, BaseException]:
        """Return why each FAILED channel failed."""
        return {n: c.error for n, c in self._channels.items() if c.error is not None}

    async def start(
        self, name: str, settings: ChannelConfig, adapter: ChannelAdapter, *, deliver: Deliver
    ) -> Channel:
        """Supervise `adapter` as channel `name`; return once it is receiving.

        Task-group `start()` semantics: the channel keeps running (reconnecting as needed)
        after this returns, and cancelling the wait does not stop it. Raises its start
        failure (`ChannelAuthError`: bad credentials) or `ChannelError` when the channel
        is stopped before it was ever ready; either way it is still in the set (FAILED or
        STOPPED) until `stop`.
        """
        if name in self._channels:
            raise ValueError(f"channel {name!r} is already in the set")
        channel = self._channels[name] = Channel(name=name, settings=settings, adapter=adapter, on_ended=self._ended)
        channel._task = self._spawn(self._supervise(channel, deliver), f"channel:{name}")
        await channel._settled.wait()
        if channel.state is ChannelState.READY:
            return channel
        if channel.error is not None:
            raise channel.error
        raise ChannelError(name, "stopped before it was ready")

    async def stop(self, name: str) -> None:
        """Stop channel `name`: cancel its supervisor, wait until it has ended, close its adapter.

        An adapter a lease holds (a reply streaming through it) stops receiving now and is
        closed when the last lease is released, so that reply finishes where it began.
        """
        channel = self._channels.pop(name, None)
        if channel is None:
            return
        task = channel._task
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        channel._stopped()
        if channel._leases:
            channel._retired = True
            self._retired.append(channel)
            logger.info("channel {}: the old adapter closes once the replies streaming through it end ({})", name, channel._leases)
            return
        await channel.adapter.aclose()

    def lease(self, channel: Channel) -> None:
        """Hold `channel`'s adapter open for one streamed reply until `release` (across a `stop`)."""
        channel._leases += 1

    async def release(self, channel: Channel) -> None:
        """Let go of a `lease`; the last release of a stopped channel closes its adapter."""
        channel._leases -= 1
        if channel._leases or channel not in self._retired:
            return
        try:
            await channel.adapter.aclose()
        except Exception as exc:
            logger.opt(exception=exc).warning("closing the old adapter of channel {} failed", channel.name)
        if channel in self._retired:  # removed after the close: one cut short is closed by `close_all`
            self._retired.remove(channel)

    def _ended(self, name: str) -> None:
        self.closed_by_user.append(name)
        self.ended.set()

    def serving(self) -> list[str]:
        """Return the channels still receiving or connecting (not stopped, failed or closed)."""
        live = (ChannelState.READY, ChannelState.STARTING)
        return [name for name, channel in self._channels.items() if channel.state in live]

    def cancel_all(self) -> None:
        """Cancel every supervisor (the runtime is closing; `close_all` follows)."""
        for channel in self._channels.values():
            if channel._task is not None:
                channel._task.cancel()

    async def close_all(self) -> None:
        """Close every adapter (those kept open for leased streams too), logging (never raising) a failure."""
        retired, self._retired = self._retired, []
        for channel in [*self._channels.values(), *retired]:
            channel._stopped()
            try:
                await channel.adapter.aclose()
            except Exception as exc:
                logger.opt(exception=exc).warning("closing channel {} failed", channel.name)

    @staticmethod
    async def _supervise(channel: Channel, deliver: Deliver) -> None:
        try:
            await supervise(channel.adapter, deliver, on_ready=channel._ready, on_fatal=channel._failed)
        finally:
            if channel.state is ChannelState.STARTING:  # never ready: wake whoever awaits the start
                channel._stopped()
