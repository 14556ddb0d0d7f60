"""The channel supervisor: a crash loop backs off even when each attempt reports ready."""

from __future__ import annotations

import asyncio
import random

from channels.base import ApprovalPrompt, ChannelError, Deliver, Outbound, Ready
from channels.supervisor import Backoff, supervise


class _FlappingAdapter:
    """Connects (reports ready), then drops the connection at once, every time."""

    name = "flappy"
    max_message_chars = 4096

    def __init__(self, *, stop_after: int) -> None:
        self.runs = 0
        self.stop_after = stop_after
        self.done = asyncio.Event()

    async def run(self, deliver: Deliver, ready: Ready) -> None:
        self.runs += 1
        ready()
        if self.runs >= self.stop_after:
            self.done.set()
            await asyncio.Event().wait()
        raise ChannelError(self.name, "connection reset")

    async def send(self, message: Outbound) -> None:
        raise AssertionError("not used")

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None:
        raise AssertionError("not used")

    async def typing(self, chat: str, thread: str | None) -> None:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        return None


async def test_a_crash_loop_backs_off_although_each_attempt_reported_ready() -> None:
    adapter = _FlappingAdapter(stop_after=6)
    backoff = Backoff(base_s=0.001, cap_s=60.0, rng=random.Random(7))
    readies: list[int] = []

    async def no_delivery(message: object) -> None:
        raise AssertionError("not used")

    task = asyncio.create_task(
        supervise(adapter, no_delivery, on_ready=lambda: readies.append(1), on_fatal=lambda exc: None, backoff=backoff)
    )
    await asyncio.wait_for(adapter.done.wait(), 5)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert len(readies) == 6
    # Five drops right after ready: the delay kept doubling instead of restarting at the base.
    assert backoff.attempt == 5
