"""Keep one adapter connected: reconnect with capped exponential backoff plus jitter."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Final

from loguru import logger

from channels.base import ChannelAdapter, ChannelAuthError, ChannelEnded, ChannelError, ChannelUnusable, Deliver

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
) -> None:
    """Run `adapter` until cancelled, reconnecting after `ChannelError`.

    A `ChannelAuthError` (bad token), a `ChannelUnusable` or a `ChannelEnded` (its person
    closed it) is reported through `on_fatal` once and not retried:
    the channel stays down, the rest of the daemon keeps serving. Any other unexpected
    exception is treated like a lost connection. Cancellation propagates.
    """
    backoff = backoff or Backoff()
    loop = asyncio.get_running_loop()
    while True:
        ready_at: list[float] = []

        def ready() -> None:
            # The backoff is not reset here: a channel that connects and then crashes at once
            # would otherwise reconnect at the base delay forever. It resets only after the
            # connection stayed up for a stable period (below).
            ready_at.append(loop.time())
            on_ready()

        try:
            await adapter.run(deliver, ready)
            reason = "the connection closed"
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
        except ChannelError as exc:
            reason = exc.reason
        except Exception as exc:  # an SDK bug must not kill the daemon; reconnect instead
            logger.opt(exception=exc).error("channel {} crashed", adapter.name)
            reason = f"{type(exc).__name__}: {exc}"
        if ready_at and loop.time() - ready_at[0] > _STABLE_AFTER_S:
            backoff.reset()
        delay = backoff.next_delay()
        logger.warning("channel {}: {}; reconnecting in {:.1f}s", adapter.name, reason, delay)
        await asyncio.sleep(delay)
