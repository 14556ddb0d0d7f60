"""Keep one adapter connected: reconnect with capped exponential backoff plus jitter."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Final

from loguru import logger

from channels.base import ChannelAdapter, ChannelAuthError, ChannelEnded, ChannelError, ChannelUnusable, Deliver, IntakeDeferred
from orchestrator.lifecycle import Lifecycle

__all__ = ["Backoff", "supervise"]

_STABLE_AFTER_S: Final = 60.0


class Backoff:
    """Capped exponential backoff with full jitter."""

    def __init__(self, *, base_s: float = 1.0, cap_s: float = 60.0, rng: random.Random | None = None) -> None:
        self.base_s, self.cap_s = base_s, cap_s
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        """Return the next delay and advance."""
        ceiling = min(self.cap_s, self.base_s * (2 ** self.attempt))
        self.attempt += 1
        return self._rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """Start again from the base delay."""
        self.attempt = 0


async def supervise(
    adapter: ChannelAdapter,
    deliver: Deliver,
    *,
    on_ready: Callable[[], None],
    on_fatal: Callable[[BaseException], None],
    backoff: Backoff | None = None,
    on_change: Callable[[Lifecycle, str | None], None] | None = None,
) -> None:
    """Run `adapter` until cancelled, reconnecting after `ChannelError`.

    A `ChannelAuthError` (bad token), a `ChannelUnusable` or a `ChannelEnded` (its person
    closed it) is reported through `on_fatal` once and not retried:
    the channel stays down, the rest of the daemon keeps serving. An `IntakeDeferred` (the
    core could not store a message) reconnects with a quiet line. Any other unexpected
    exception is treated like a lost connection. Cancellation propagates.

    `on_change` hears what happens between: `RECONNECTING` (with the reason) when the
    connection was lost (here, or in the SDK: `report_reconnecting`), `DEGRADED` (with the
    reason) when the adapter reports a platform failing requests it retries in place
    (`report_degraded`), and `READY` when it reports the platform back (`report_recovered`).
    """
    backoff = backoff or Backoff()
    loop = asyncio.get_running_loop()
    changed = on_change or (lambda state, reason: None)
    while True:
        ready_at: list[float] = []
        ready = _Readiness(loop, ready_at, on_ready, changed)
        try:
            await adapter.run(deliver, ready)
            reason, level = "the connection closed", "WARNING"
        except ChannelAuthError as exc:
            logger.error("channel {}: credentials refused, not retrying: {}", adapter.name, exc.reason)
            on_fatal(exc)
            return
        except ChannelUnusable as exc:
            logger.warning("channel {} is disabled: {}", adapter.name, exc.reason)
            on_fatal(exc)
            return
        except ChannelEnded as exc:  # its person closed it: reconnecting would reopen what they closed
            on_fatal(exc)
            return
        except IntakeDeferred as exc:  # the core has said why (once); each retry is a quiet line
            reason, level = exc.reason, "INFO"  # and the platform was not lost: no state change
        except ChannelError as exc:
            reason, level = exc.reason, "WARNING"
        except Exception as exc:  # an SDK bug must not kill the daemon; reconnect instead
            logger.opt(exception=exc).error("channel {} crashed", adapter.name)
            reason, level = f"{type(exc).__name__}: {exc}", "WARNING"
        if ready_at and loop.time() - ready_at[0] > _STABLE_AFTER_S:
            backoff.reset()
        delay = backoff.next_delay()
        if level == "WARNING":
            changed(Lifecycle.RECONNECTING, reason)
        logger.log(level, "channel {}: {}; reconnecting in {:.1f}s", adapter.name, reason, delay)
        await asyncio.sleep(delay)


class _Readiness:
    """The `ready` callback one attempt's `run` gets, with the `degraded` and `recovered` reports."""

    __slots__ = ("_changed", "_loop", "_on_ready", "_ready_at")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ready_at: list[float],
        on_ready: Callable[[], None],
        changed: Callable[[Lifecycle, str | None], None],
    ) -> None:
        self._loop, self._ready_at, self._on_ready, self._changed = loop, ready_at, on_ready, changed

    def __call__(self) -> None:
        # The backoff is not reset here: a channel that connects and then crashes at once
        # would otherwise reconnect at the base delay forever. It resets only after the
        # connection stayed up for a stable period (in `supervise`).
        self._ready_at.append(self._loop.time())
        self._on_ready()

    def degraded(self, reason: str) -> None:
        """The platform fails requests the adapter retries in place."""
        self._changed(Lifecycle.DEGRADED, reason)

    def reconnecting(self, reason: str) -> None:
        """The connection was lost; the SDK reconnects in place."""
        self._changed(Lifecycle.RECONNECTING, reason)

    def recovered(self) -> None:
        """The platform answers again."""
        self._changed(Lifecycle.READY, None)
