"""Pairing in the chat: a stranger's DM gets a code; a route approver decides it with `/pairing approve|deny CODE`.

Who is a stranger, who may decide a code and what a pairing admits are the seam's
(`orchestrator/seam/admission.py`); this module keeps the counts, writes the store and the
audit rows, and says it in the chat. A stranger's answers are capped per hour (then
silence), and so are one sender's refused decisions (then refused without reading the code:
what makes guessing hopeless, see docs/security.md#pairing-codes).
"""

from __future__ import annotations

import time
from typing import Final

from loguru import logger

from channels import Inbound, Outbound
from orchestrator.daemon.admission import Admitted
from orchestrator.daemon.approvals import send
from orchestrator.daemon.runtime import Runtime
from orchestrator.seam import (
    ANSWERS_PER_HOUR,
    ATTEMPTS_PER_HOUR,
    CODE_TTL_S,
    MAX_PENDING_PER_CHANNEL,
    PAIRING_COMMAND,
    resolve_admission,
    route_by_id,
)
from orchestrator.store import PairingCode

__all__ = ["answer_stranger", "decide_pairing"]

_ANSWER: Final = "answer"  # the pairing_counts kinds
_ATTEMPT: Final = "attempt"
USAGE: Final = "Usage: /pairing approve CODE or /pairing deny CODE, with the code the new sender was given."


async def answer_stranger(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """Answer a stranger's DM: their code (the same one while it is pending), "try later", or silence."""
    runtime.store.mark(inbound.channel, inbound.event_id, "done")
    now, store = time.time(), runtime.pairing
    channel, sender = inbound.channel, inbound.sender
    if store.count(channel=channel, sender=sender, kind=_ANSWER, now=now) >= ANSWERS_PER_HOUR:
        logger.info("{} stranger {} had {} answers this hour: silence", channel, sender, ANSWERS_PER_HOUR)
        return
    store.note(channel=channel, sender=sender, kind=_ANSWER, now=now)
    admission = resolve_admission(admitted.route)
    words = inbound.text.split()
    if words and words[0].lower() == PAIRING_COMMAND:  # a stranger deciding a code: their own, or a guess
        runtime.audit.record_pairing(
            "refused", channel=channel, sender=sender, route=admission.route_id, decided_by=f"{channel}:{sender}",
            reason="a stranger cannot decide pairing codes",
        )
        await _tell(runtime, channel, inbound.chat, "Only an approver of this bot can approve a pairing code.")
        return
    offer = store.offer(
        channel=channel, route=admission.route_id, sender=sender, chat=inbound.chat, sender_name=inbound.sender_name,
        now=now, max_pending=MAX_PENDING_PER_CHANNEL,
    )
    if offer.code is None:
        logger.info("{}: {} pairing codes pending; stranger {} told to try later", channel, MAX_PENDING_PER_CHANNEL, sender)
        await _tell(runtime, channel, inbound.chat, "I cannot take new pairing requests right now. Please try again later.")
        return
    if offer.new:
        runtime.audit.record_pairing(
            "offered", channel=channel, sender=sender, code=offer.code.code, route=admission.route_id,
            reason=f"valid {CODE_TTL_S / 3600:g} h",
        )
    minutes = max(1, int((offer.code.created + CODE_TTL_S - now) // 60))
    await _tell(
        runtime, channel, inbound.chat,
        f"I don't know you yet. Your pairing code is {offer.code.code}: ask the owner of this bot to approve it "
        f"(it is valid for {minutes} more minutes).",
    )


async def decide_pairing(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/pairing approve|deny CODE` from an admitted sender: decided only by an approver of the code's route."""
    runtime.store.mark(inbound.channel, inbound.event_id, "done")
    words = inbound.text.split()
    if len(words) != 3 or words[1].lower() not in ("approve", "deny"):
        await _tell(runtime, inbound.channel, inbound.chat, USAGE)
        return
    verb, wanted = words[1].lower(), words[2]
    now, store = time.time(), runtime.pairing
    channel, sender, decider = inbound.channel, inbound.sender, f"{inbound.channel}:{inbound.sender}"
    if store.count(channel=channel, sender=sender, kind=_ATTEMPT, now=now) >= ATTEMPTS_PER_HOUR:
        await _tell(runtime, channel, inbound.chat, "Too many refused pairing decisions this hour; try again later.")
        return
    code = store.find(wanted, now=now)
    route = route_by_id(admitted.config, code.route) if code is not None and code.channel == channel else None
    if code is None or route is None or not resolve_admission(route).may_decide(sender, code_sender=code.sender):
        store.note(channel=channel, sender=sender, kind=_ATTEMPT, now=now)
        runtime.audit.record_pairing(
            "refused", channel=channel, sender=code.sender if code is not None else "?", code=wanted.upper(),
            route=code.route if code is not None else None, decided_by=decider,
            reason="not pending here, or the decider is not an approver of its route (or is its sender)",
        )
        # One line for every refusal: it never tells a guesser that a code exists.
        await _tell(runtime, channel, inbound.chat, f"There is no pending pairing code {wanted.upper()} that you may decide.")
        return
    if verb == "deny":
        store.deny(code)
        runtime.audit.record_pairing(
            "denied", channel=channel, sender=code.sender, code=code.code, route=code.route, decided_by=decider
        )
        await _tell(runtime, channel, inbound.chat, f"Denied pairing code {code.code} ({_who(code)}).")
        return
    store.approve(code, by=decider, now=now)
    runtime.audit.record_pairing(
        "approved", channel=channel, sender=code.sender, code=code.code, route=code.route, decided_by=decider
    )
    await _tell(runtime, channel, inbound.chat, f"Approved {_who(code)}: they may now talk to {route.agent!r} here.")
    await _tell(runtime, channel, code.chat, "You were approved. Send your message again.")


def _who(code: PairingCode) -> str:
    return f"{code.sender_name} ({code.sender})" if code.sender_name else code.sender


async def _tell(runtime: Runtime, channel: str, chat: str, text: str) -> None:
    adapter = runtime.channels.adapter(channel)
    if adapter is None:
        logger.warning("channel {} is not connected: a pairing answer in chat {} was not sent", channel, chat)
        return
    await send(adapter, Outbound(chat=chat, text=text))
