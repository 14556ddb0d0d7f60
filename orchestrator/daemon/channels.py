"""ChannelSet: the daemon's channels, each a supervised adapter with one explicit state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from loguru import logger

from channels import ChannelAdapter, ChannelAuthError, ChannelEnded, ChannelError, ChannelUnusable, Deliver, supervise
from orchestrator.config import ChannelConfig
from orchestrator.lifecycle import Lifecycle, LifecycleRecord

__all__ = ["Channel", "ChannelSet", "ChannelState", "ChannelStatus"]

# The one state value (STYLE rule 19); the name stays for the daemon's callers.
ChannelState = Lifecycle


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelStatus:
    """What `/health`, the metrics, the status document and the ready line show of one channel."""

    kind: str
    state: Lifecycle
    since: float  # wall-clock seconds when it entered `state`
    last_error: str | None  # the last failure seen (kept after a recovery), None when there was none
    error: str | None  # why it was refused for good (bad credentials), else None

    @property
    def ready(self) -> bool:
        """Return True while the channel is connected and its platform answers."""
        return self.state is Lifecycle.READY


class Channel:
    """One channel: its settings, adapter, state and supervising task; only `ChannelSet` makes one."""

    def __init__(
        self, *, name: str, settings: ChannelConfig, adapter: ChannelAdapter, on_ended: Callable[[str], None]
    ) -> None:
        self.name = name
        self._on_ended = on_ended
        self.settings = settings
        self.adapter = adapter
        self._record = LifecycleRecord()
        self._error: BaseException | None = None
        self._ever_ready = False
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
    def state(self) -> Lifecycle:
        """Return the current state."""
        return self._record.state

    @property
    def error(self) -> BaseException | None:
        """Return why the channel was refused for good (None otherwise)."""
        return self._error

    @property
    def refused(self) -> bool:
        """Return True when the channel stopped for good on its own (bad credentials, unusable)."""
        return self._error is not None

    def status(self) -> ChannelStatus:
        """Return the channel's status row."""
        record = self._record
        return ChannelStatus(
            kind=self.kind,
            state=record.state,
            since=record.since,
            last_error=record.last_error,
            error=str(self._error) if self._error is not None else None,
        )

    def _move(self, state: Lifecycle, error: str | None = None, *, said: bool = False) -> None:
        # said: the supervisor already logged why (a refused token, a disabled channel), so the
        # change is an INFO line: one warning per cause
        left = self._record.move(state, error)
        if left is None:
            return
        if state in (Lifecycle.DEGRADED, Lifecycle.RECONNECTING) or (state is Lifecycle.STOPPED and error):
            # Bound as a lifecycle line: the status document's `last_errors` keeps it.
            logger.bind(lifecycle=f"channel {self.name}").log(
                "INFO" if said else "WARNING",
                "channel {} is {} (was {}): {}", self.name, state.value, left.value, error,
            )
        else:
            logger.info("channel {} is {} (was {})", self.name, state.value, left.value)

    def _ready(self) -> None:
        if self._record.state is not Lifecycle.STOPPED:
            self._ever_ready = True
            self._move(Lifecycle.READY)
        self._settled.set()

    def _changed(self, state: Lifecycle, reason: str | None) -> None:
        current = self._record.state
        if current is Lifecycle.STOPPED:
            return
        if state is Lifecycle.RECONNECTING and not self._ever_ready:
            self._record.move(Lifecycle.CONNECTING, reason)  # still its first connect
        elif state is Lifecycle.DEGRADED and current is not Lifecycle.READY:
            if reason is not None:
                self._record.last_error = reason
        elif state is Lifecycle.READY and current not in (Lifecycle.DEGRADED, Lifecycle.RECONNECTING):
            return
        else:
            self._move(state, reason)

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, ChannelEnded):  # closed by its person: stopped, not failed
            self._move(Lifecycle.STOPPED)
            self._settled.set()
            self._on_ended(self.name)
            return
        self._error = exc
        self._move(Lifecycle.STOPPED, str(exc), said=isinstance(exc, ChannelAuthError | ChannelUnusable))
        self._settled.set()

    def _stopped(self) -> None:
        self._move(Lifecycle.STOPPED)
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
        """Return the adapter of channel `name` unless the channel is gone or refused for good."""
        channel = self._channels.get(name)
        if channel is None or channel.refused:
            return None
        return channel.adapter

    def status(self) -> dict[str, ChannelStatus]:
        """Return every channel's status, by name in order."""
        return {name: self._channels[name].status() for name in sorted(self._channels)}

    def failures(self) -> dict[str, BaseException]:
        """Return why each channel refused for good (bad credentials, unusable) stopped."""
        return {n: c.error for n, c in self._channels.items() if c.error is not None}

    async def start(
        self, name: str, settings: ChannelConfig, adapter: ChannelAdapter, *, deliver: Deliver
    ) -> Channel:
        """Supervise `adapter` as channel `name`; return once it is receiving.

        Task-group `start()` semantics: the channel keeps running (reconnecting as needed)
        after this returns, and cancelling the wait does not stop it. Raises its start
        failure (`ChannelAuthError`: bad credentials) or `ChannelError` when the channel
        is stopped before it was ever ready; either way it is still in the set (STOPPED)
        until `stop`.
        """
        if name in self._channels:
            raise ValueError(f"channel {name!r} is already in the set")
        channel = self._channels[name] = Channel(name=name, settings=settings, adapter=adapter, on_ended=self._ended)
        channel._task = self._spawn(self._supervise(channel, deliver), f"channel:{name}")
        await channel._settled.wait()
        if channel.state is not Lifecycle.STOPPED:  # ready (and maybe already degraded)
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
        """Return the channels still receiving, connecting or reconnecting (not stopped, failed or closed)."""
        return [name for name, channel in self._channels.items() if channel.state is not Lifecycle.STOPPED]

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
            await supervise(
                channel.adapter, deliver, on_ready=channel._ready, on_fatal=channel._failed, on_change=channel._changed
            )
        finally:
            if not channel._settled.is_set():  # never ready: wake whoever awaits the start
                channel._stopped()
