"""The slow-down line of `[[routes]] rate_limit` (the seam resolves the limit, admission counts it)."""

from __future__ import annotations

import math

from loguru import logger

from channels import Inbound, Outbound
from orchestrator.daemon.approvals import send
from orchestrator.daemon.runtime import Runtime
from orchestrator.store import RateVerdict

__all__ = ["slow_down", "slow_down_text"]


def slow_down_text(verdict: RateVerdict) -> str:
    """Return the one line a sender past the limit gets per window."""
    return (
        f"You are sending messages faster than I can take them: please slow down and try again in "
        f"{max(1, math.ceil(verdict.retry_in_s))} s. Messages until then are not answered."
    )


async def slow_down(runtime: Runtime, inbound: Inbound, verdict: RateVerdict) -> None:
    """Tell the sender once per window; the limited message itself stays in the inbox, marked `limited`."""
    adapter = runtime.channels.adapter(inbound.channel)
    if adapter is None:
        logger.warning("channel {} is not connected: a slow-down line in chat {} was not sent", inbound.channel, inbound.chat)
        return
    await send(adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=slow_down_text(verdict), reply_to=inbound.message_id))
