"""start_channels() and process_message(): the only way an inbound message reaches an agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Final

from loguru import logger

from channels import (
    ApprovalAnswer,
    ChannelAdapter,
    ChannelError,
    Inbound,
    IntakeDeferred,
    create_adapter,
)
from orchestrator.config import ChannelConfig
from orchestrator.daemon.admission import Admitted, Disposition, admit
from orchestrator.daemon.approvals import answer_approval
from orchestrator.daemon.channels import Channel
from orchestrator.daemon.commands import run_command
from orchestrator.daemon.delivery import inbound_of, serve_deliveries
from orchestrator.daemon.rate_limits import slow_down
from orchestrator.daemon.replies import CONTINUED, close_abandoned, deliver_reply, reopen_abandoned, resume_reply
from orchestrator.daemon.runtime import Runtime
from orchestrator.daemon.turns import run_chat_turn
from orchestrator.daemon.whoami import answer_whoami, whoami_allowed
from orchestrator.sessions import TurnRefused
from orchestrator.store import InboxRow, disk_full, state_fault

__all__ = [
    "deliver", "hold_replayed", "process_message", "replay_unfinished", "start_channel", "start_channels", "stop_channel",
]


# What `admit` decided without writing the inbox: nothing to sync before the platform is told.
_NOTHING_STORED: Final = (Disposition.NO_ROUTE, Disposition.NOT_TAKEN, Disposition.WHOAMI)


async def start_channels(runtime: Runtime, *, ready_timeout_s: float = 30.0) -> None:
    """Start one supervised adapter per configured channel.

    Returns when each is receiving or has failed for good, or after `ready_timeout_s`
    (a channel still connecting keeps retrying in the background).
    """
    await start_channel_set(runtime, runtime.config.channels.items(), ready_timeout_s=ready_timeout_s)


async def start_channel_set(
    runtime: Runtime, channels: Iterable[tuple[str, ChannelConfig]], *, ready_timeout_s: float
) -> list[str]:
    """Start `channels` together; return the names receiving within `ready_timeout_s`.

    A channel refused for good stays STOPPED (with its error) in `runtime.channels`; one still connecting
    after the timeout keeps trying in the background (only the wait for it ends).
    """

    async def attempt(name: str, settings: ChannelConfig, adapter: ChannelAdapter) -> bool:
        try:
            await start_channel(runtime, name, settings, adapter=adapter)
        except ChannelError:
            return False
        return True

    # Adapters are created first: a setting no adapter accepts raises here, as itself.
    adapters = [(n, s, create_adapter(n, s, secrets=runtime.secret)) for n, s in channels]
    starts: dict[str, asyncio.Task[bool]] = {}
    try:
        async with asyncio.timeout(ready_timeout_s), asyncio.TaskGroup() as group:
            for name, settings, adapter in adapters:
                starts[name] = group.create_task(attempt(name, settings, adapter))
    except TimeoutError:
        late = [n for n, t in starts.items() if t.cancelled()]
        logger.warning("channels not ready after {}s, still trying: {}", ready_timeout_s, ", ".join(late))
    return [n for n, t in starts.items() if t.done() and not t.cancelled() and t.result()]


async def start_channel(
    runtime: Runtime, name: str, settings: ChannelConfig, *, adapter: ChannelAdapter | None = None
) -> Channel:
    """Create (unless given) and supervise one channel's adapter; return once it is receiving.

    Raises its start failure (`ChannelAuthError` for refused credentials); the channel then
    stays in `runtime.channels` as STOPPED, with its error.
    """
    if adapter is None:
        adapter = create_adapter(name, settings, secrets=runtime.secret)

    async def on_delivery(item: Inbound | ApprovalAnswer, /, *, synced: bool = True) -> None:
        await deliver(runtime, item, synced=synced)

    return await runtime.channels.start(name, settings, adapter, deliver=on_delivery)


async def stop_channel(runtime: Runtime, name: str) -> None:
    """Stop receiving on one channel, wait until it has, and close its adapter."""
    await runtime.channels.stop(name)


async def deliver(runtime: Runtime, item: Inbound | ApprovalAnswer, *, synced: bool = True) -> None:
    """Adapter callback: returns once the message is durably accepted (or dropped).

    Routing, de-duplication and the inbox write happen right here, without waiting for
    the event loop, so an adapter delivering one message at a time is never starved; then
    the write is synced to disk (`Runtime.inbox_sync`; with `synced=False` the adapter's
    next synced delivery does it for the whole batch), so what the platform is told we
    have survives a power cut. A full disk raises `IntakeDeferred` (said once, by
    `Runtime.disk`): the platform delivers the message again once space is back. The
    turn then runs in the runtime's TaskGroup; turns of one session start in arrival order
    (tasks start in creation order and the session lock is FIFO).
    """
    if isinstance(item, ApprovalAnswer):
        # Answered off the adapter's call: the platform wants a button press acknowledged
        # within seconds (Slack and Discord: 3 s), and telling the presser may be slow.
        runtime.spawn(answer_approval(runtime.approvals, runtime.channels, item), name=f"answer:{item.request_id}")
        return
    try:
        admitted = admit(runtime, item)
        # On disk before the adapter acknowledges it (one fsync, shared with concurrent
        # deliveries); a message no route takes wrote nothing. A duplicate still waits: its
        # first delivery's write may not be synced yet.
        if synced and admitted not in _NOTHING_STORED:
            await runtime.inbox_sync.wait()
    except Exception as exc:
        if disk_full(exc):  # not stored, so not acknowledged: the platform delivers it again
            runtime.disk.met()
            raise IntakeDeferred(item.channel, "the state disk is full; the message was not accepted") from exc
        reason = state_fault(exc)
        if reason is None:
            raise
        # Not stored, so not acknowledged: the platform delivers it again after the restart.
        runtime.fail(reason)
        raise ChannelError(item.channel, "the state store failed; the message was not accepted") from exc
    runtime.disk.cleared()
    if isinstance(admitted, Admitted):
        runtime.spawn(
            process_message(runtime, item, admitted=admitted), name=f"msg:{item.channel}:{item.event_id}"
        )
    elif admitted is Disposition.WHOAMI and whoami_allowed(runtime, item):
        runtime.spawn(answer_whoami(runtime, item), name=f"whoami:{item.channel}:{item.event_id}")


async def process_message(
    runtime: Runtime,
    inbound: Inbound,
    *,
    admitted: Admitted | None = None,
    replay: bool = False,
) -> Disposition:
    """Admit one message (unless `deliver` already did), then run its turn and send the reply.

    The only way an inbound message reaches an agent: every channel message and every
    replayed one comes through here.
    """
    if admitted is None:
        outcome = admit(runtime, inbound, replay=replay)
        if not isinstance(outcome, Admitted):
            return outcome
        admitted = outcome
    if admitted.limited is not None:  # past the route's rate limit: not run; one line per window
        if admitted.limited.notify:
            await slow_down(runtime, inbound, admitted.limited)
        return Disposition.LIMITED
    if admitted.busy is not None:
        note = (
            f"I still have {admitted.busy} of your messages to answer, so I did not take this one. "
            "Please send it again once I have caught up (or /stop the current answer)."
        )
        async with runtime.in_flight():  # the note is this message's reply, under the reply protocol
            await deliver_reply(runtime, inbound, note)
        return Disposition.BUSY
    if admitted.command is not None:
        await run_command(runtime, inbound, admitted)
        return Disposition.COMMAND
    state = admitted.state
    if state is None:  # admit gives every chat message one
        raise RuntimeError(f"message {inbound.event_id} was admitted without its session place")
    if not replay:  # the session's messages from before the restart are answered first
        try:
            await runtime.held.cleared(admitted.key)
        except BaseException:
            runtime.sessions.release(state)
            raise
    try:
        return await run_chat_turn(runtime, inbound, admitted, state)
    except TurnRefused:  # stopping: leave it pending for the next start
        return Disposition.NOT_ACCEPTING
    except Exception as exc:  # a bug in one turn must not leave the user in silence
        if state_fault(exc) is not None:
            raise  # the state files failed: the runtime stops the daemon; the row is replayed later
        logger.opt(exception=exc).error("turn for {} failed", inbound.event_id)
        async with runtime.in_flight():  # this message's reply, under the reply protocol
            await deliver_reply(runtime, inbound, "Sorry, something went wrong while answering; the error is logged.")
        return Disposition.FAILED


def hold_replayed(runtime: Runtime, rows: list[InboxRow]) -> dict[tuple[str, str], Admitted]:
    """Admit the previous process's pending messages now, before channels start: their session places come first.

    Pass the result to `replay_unfinished`, so a session's held messages and the ones that
    arrive once channels receive are answered in arrival order.
    """
    held: dict[tuple[str, str], Admitted] = {}
    for row in rows:
        if row.state == "pending":
            outcome = admit(runtime, inbound_of(row.body), replay=True)
            if isinstance(outcome, Admitted):
                held[(row.channel, row.event_id)] = outcome
                runtime.held.hold(outcome.key)
    return held


async def _answer_held(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    try:
        await process_message(runtime, inbound, admitted=admitted, replay=True)
    finally:
        runtime.held.release(admitted.key)


async def replay_unfinished(
    runtime: Runtime, rows: list[InboxRow], *, held: dict[tuple[str, str], Admitted] | None = None
) -> None:
    """Finish what the previous process accepted: run pending messages, close interrupted turns.

    `rows` must be read (`runtime.store.unfinished()`) before channels start, so messages
    this process accepts are never mistaken for the previous one's; `held` are those of
    them `hold_replayed` admitted before the channels started. Then the delivery queue
    starts (`serve_deliveries`, for the runtime's whole life): it sends at once what the
    previous process left queued, and every reply parked from now on.
    """
    runtime.spawn(serve_deliveries(runtime), name="deliveries")
    held = held or {}
    for row in rows:
        inbound = inbound_of(row.body)
        admitted = held.get((row.channel, row.event_id))
        if inbound.channel not in runtime.channels:
            logger.warning("channel {} is gone; dropping accepted message {}", inbound.channel, inbound.event_id)
            runtime.store.mark(row.channel, row.event_id, "interrupted")
            if admitted is not None:
                runtime.held.release(admitted.key)
                if admitted.state is not None:
                    runtime.sessions.release(admitted.state)
            continue
        if row.state == "pending":
            work = (
                _answer_held(runtime, inbound, admitted) if admitted is not None
                else process_message(runtime, inbound, replay=True)
            )
            runtime.spawn(work, name=f"replay:{row.event_id}")
            continue
        if row.state == "replying" and row.reply is not None:  # the turn finished; send the rest
            runtime.spawn(_resume(runtime, inbound, row), name=f"resend:{row.event_id}")
            continue
        # The turn itself was cut off: its notice is this message's reply, under the same
        # protocol, so it is sent once even if this start is killed too.
        preview = inbound.text if len(inbound.text) <= 80 else inbound.text[:77] + "..."
        notice = (
            f"I was restarted while answering \"{preview}\" and could not finish. "
            "Please send it again if you still need it."
        )
        if row.stream:  # it was streaming: the half-shown reply itself says so
            runtime.spawn(_close_stream(runtime, inbound, row.stream, notice), name=f"notice:{row.event_id}")
            continue
        runtime.spawn(resume_reply(runtime, inbound, notice, sent=0, notice=True), name=f"notice:{row.event_id}")


async def _resume(runtime: Runtime, inbound: Inbound, row: InboxRow) -> None:
    """Send the rest of a finished turn's reply, in place of the stream it had not yet replaced.

    The half-shown messages are edited into the reply (a message that refuses the edit gets
    its part posted anew); an adapter that cannot edit them (it no longer streams) follows
    them up with `CONTINUED` and the reply is sent in full below.
    """
    stream = reopen_abandoned(runtime, inbound, row.stream)
    if stream is None and row.stream and row.sent == 0:
        await close_abandoned(runtime, inbound, row.stream, CONTINUED)
    await resume_reply(runtime, inbound, row.reply or "", sent=row.sent, stream=stream)


async def _close_stream(runtime: Runtime, inbound: Inbound, message_ids: tuple[str, ...], notice: str) -> None:
    """Turn a stream the previous process left half-shown into `notice`, under the reply protocol.

    The half-shown messages are edited: the first says `notice`, the rest are removed (a
    restart during it edits them again, so the user is told once). Where they cannot be
    edited (an adapter that no longer streams) they are followed up with the notice.
    """
    stream = reopen_abandoned(runtime, inbound, message_ids)
    if stream is not None:
        await resume_reply(runtime, inbound, notice, sent=0, stream=stream)
        return
    async with runtime.in_flight():
        if await close_abandoned(runtime, inbound, message_ids, notice):
            runtime.store.mark(inbound.channel, inbound.event_id, "interrupted")
            return
    await resume_reply(runtime, inbound, notice, sent=0, notice=True)
