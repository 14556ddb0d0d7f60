"""A chat message's turn: `Sessions.run_turn` with the channel's hooks (typing indicator, reply)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextlib import nullcontext
from types import TracebackType
from typing import Any, Final

from loguru import logger

from channels import ChannelAdapter, ChannelError, FileAdapter, Inbound, Outbound, StreamingAdapter
from orchestrator.daemon.admission import Admitted, Disposition
from orchestrator.daemon.approvals import ChannelApprover
from orchestrator.daemon.channels import Channel, ChannelSet
from orchestrator.daemon.media import ChatFileOutlet, echo_transcripts, take_in_chat
from orchestrator.daemon.replies import close_abandoned, deliver_reply, finish_handed_over, finish_row, fit_reply
from orchestrator.daemon.runtime import Runtime
from orchestrator.daemon.streaming import StreamFeed
from orchestrator.engine import TurnResult, log_turn
from orchestrator.media import MediaRefused
from orchestrator.seam import ConstructionPath, build_channel, mcp_servers_for, resolve_chat_commands
from orchestrator.sessions import SessionState, Turn, TurnHook
from orchestrator.store import state_fault
from orchestrator.tools import bind_outlet

__all__ = ["run_chat_turn", "typing_indicator"]

_TYPING_EVERY_S: Final = 4.0


async def run_chat_turn(runtime: Runtime, inbound: Inbound, admitted: Admitted, state: SessionState) -> Disposition:
    """Run the turn of an admitted chat message in its session place and send the reply.

    Raises what the turn raised (the caller tells the user); cancelled (the daemon stopping),
    the turn keeps what it did and the inbox row stays "running", so the next start closes it
    and tells the user.
    """
    config, route = admitted.config, admitted.route
    channel = runtime.channels.get(inbound.channel)
    if channel is None:
        runtime.sessions.release(state)
        raise RuntimeError(f"channel {inbound.channel} is gone")
    commands = resolve_chat_commands(config, route)
    # A turn's approvals (its delegates' too, which the routed agent's policy granted) are the
    # routed agent's: the requester or the route's approvers answer them.
    approver = ChannelApprover(
        approvals=runtime.approvals, spawn=runtime.spawn, channels=runtime.channels, inbound=inbound,
        answerers=lambda _: commands.answerers(route.agent, inbound.sender),
    )

    pool = runtime.services.mcp
    if pool is not None:  # the first turn after READY: servers still connecting get `ready_wait_s`
        try:
            await pool.first_connects(mcp_servers_for(config, route.agent, path=ConstructionPath.CHANNEL), agent=route.agent)
        except BaseException:
            runtime.sessions.release(state)
            raise
    text = inbound.text
    media: tuple[dict[str, Any], ...] = ()
    outlet = ChatFileOutlet(adapter=channel.adapter, inbound=inbound) if isinstance(channel.adapter, FileAdapter) else None
    if inbound.attachments:
        try:
            execution = build_channel(config, route.agent, runtime.services)
            intake = await runtime.sessions.prepare(state, lambda: take_in_chat(channel.adapter, inbound, execution))
        except MediaRefused as refused:  # one clear line; nothing was kept
            runtime.sessions.release(state)
            await deliver_reply(runtime, inbound, refused.reason)
            return Disposition.ANSWERED
        except BaseException:
            runtime.sessions.release(state)
            raise
        if intake is None:  # `/stop` while its attachments were taken in (a PDF being read): nothing was kept
            runtime.sessions.release(state)
            await deliver_reply(runtime, inbound, "Stopped.", reply_to=False)
            return Disposition.STOPPED
        text, media = intake.text, intake.media
        if intake.transcripts and execution.media.echo_transcript:
            await echo_transcripts(channel.adapter, inbound, intake.transcripts)

    reply = _Reply(runtime, inbound, route.agent, config.daemon.max_reply_chars)
    reply.feed = feed = _open_stream(runtime, channel.adapter, channel.settings.stream, inbound, config.daemon.max_reply_chars)
    if feed is not None:  # the stream ends through the adapter it began on, even across a reload
        runtime.channels.lease(channel)
        reply.streamer = channel
    try:
        with bind_outlet(outlet) if outlet is not None else nullcontext():  # the chat `send_file` posts to
            turn = await runtime.sessions.run_turn(
                state,
                agent=route.agent,
                execution=lambda: build_channel(config, route.agent, runtime.services),
                text=text,
                approver=approver,
                actor=f"{inbound.channel}:{inbound.sender}",
                events=feed,
                stream=feed is not None,
                hooks=(reply, typing_indicator(runtime.channels, inbound, channel.settings.typing_after_s)),
                gate=lambda: runtime.accepting,  # stopping: leave it pending for the next start
                media=media,
            )
    except Exception as exc:
        if not reply.told or state_fault(exc) is not None:
            raise
        # The stream already ended with the apology: the user is told once, not twice.
        logger.opt(exception=exc).error("turn for {} failed", inbound.event_id)
        await finish_row(runtime, inbound)
        return Disposition.FAILED
    finally:
        if feed is not None:
            await runtime.channels.release(channel)
    return Disposition.STOPPED if turn.result is None else Disposition.ANSWERED


def _open_stream(
    runtime: Runtime, adapter: ChannelAdapter, wanted: bool, inbound: Inbound, cap: int
) -> StreamFeed | None:
    """Return the feed of a streamed reply, or None (the channel or chat does not stream)."""
    if not wanted or not isinstance(adapter, StreamingAdapter):
        return None
    stream = adapter.open_stream(
        Outbound(chat=inbound.chat, thread=inbound.thread, text="", reply_to=inbound.message_id)
    )
    if stream is None:
        return None
    store, channel, event_id = runtime.store, inbound.channel, inbound.event_id

    def record(ids: Sequence[str]) -> None:  # a full disk skips it (a restart then cannot close the stream)
        runtime.disk.attempt(lambda: store.stream_messages(channel, event_id, ids))

    return StreamFeed(stream=stream, cap=cap, on_messages=record)


_FAILED: Final = "Sorry, something went wrong while answering; the error is logged."


class _Reply:
    """The turn hook that sends the reply: one plain object per turn (no generator, no closures).

    It marks the inbox row running, counts the turn in flight until the reply is sent (or kept
    for the next start), so a drain waits for the send too instead of cancelling a reply it
    already waited for, and on a turn that ended (stopped or answered) logs it and replies.
    A turn that raised sends nothing here (the caller tells the user), unless it streamed:
    then the stream ends with the apology and `told` is set.

    With `feed` (a streamed reply) the pump runs while the engine does, and the reply is the
    stream's `finish` (or `abort` for a stopped or failed turn) on the adapter the stream was
    opened on (`streamer`, leased by the caller): a reload that restarted the channel mid-turn
    keeps that adapter open until the stream ended, so the partial message becomes the answer.
    When the old adapter can no longer reach the platform, the stream is closed as after a
    crash (`finish_handed_over`).
    """

    __slots__ = ("_runtime", "_inbound", "_agent", "_max_chars", "_turn", "_started", "feed", "streamer", "told")

    def __init__(self, runtime: Runtime, inbound: Inbound, agent: str, max_chars: int) -> None:
        self._runtime, self._inbound, self._agent, self._max_chars = runtime, inbound, agent, max_chars
        self._turn: Turn | None = None
        self._started = 0.0
        self.feed: StreamFeed | None = None
        self.streamer: Channel | None = None  # the channel (and adapter) the stream was opened on
        self.told = False

    def __call__(self, turn: Turn) -> _Reply:
        self._turn = turn
        return self

    async def __aenter__(self) -> None:
        runtime, inbound = self._runtime, self._inbound
        # On a full disk the row stays pending (a restart runs it again): the turn still runs.
        runtime.disk.attempt(lambda: runtime.store.mark(inbound.channel, inbound.event_id, "running"))
        self._started = time.monotonic()
        await runtime.in_flight().__aenter__()
        if self.feed is not None:
            self.feed.started(runtime.spawn(self.feed.pump(), name=f"stream:{inbound.event_id}"))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        flight = self._runtime.in_flight()
        try:
            if self.feed is not None:
                await self.feed.close()
                if isinstance(exc, Exception) and state_fault(exc) is None:  # the turn failed: the stream says so
                    await self._abort(self.feed, _FAILED)
                    self.told = True
            if exc_type is None and self._turn is not None:
                await self._send(self._turn.result)
        except BaseException as failed:
            await flight.__aexit__(type(failed), failed, failed.__traceback__)
            raise
        await flight.__aexit__(exc_type, exc, tb)

    async def _send(self, result: TurnResult | None) -> None:
        inbound = self._inbound
        _log_turn(inbound, self._agent, result, time.monotonic() - self._started)
        feed = self.feed
        # The transcript a full disk kept back: the reply goes out at once, the row waits for both.
        unsaved = self._turn.unsaved if self._turn is not None else None
        patience = 0.0 if unsaved is not None else None
        if result is None and feed is not None:
            await self._abort(feed, "Stopped.")
            await finish_row(self._runtime, inbound, unsaved=unsaved)
        elif result is None:
            await deliver_reply(self._runtime, inbound, "Stopped.", reply_to=False, patience_s=patience, unsaved=unsaved)
        else:
            text = fit_reply(result.text or "(no reply)", self._max_chars)
            if feed is not None and self.streamer is not None and self.streamer.retired:
                await finish_handed_over(self._runtime, inbound, text, feed.stream, unsaved=unsaved)
            else:
                await deliver_reply(
                    self._runtime, inbound, text, stream=feed.stream if feed is not None else None,
                    patience_s=patience, unsaved=unsaved,
                )

    async def _abort(self, feed: StreamFeed, ending: str) -> None:
        """End the stream with `ending`; a platform failure here is logged (the turn is over anyway).

        A stream whose channel was restarted, and whose old adapter can no longer end it, is
        closed through the current adapter instead, so the ending still reaches the chat.
        """
        try:
            await feed.stream.abort(ending)
        except ChannelError as exc:
            logger.warning("could not end a streamed reply ({}): {}", ending, exc.reason)
            if self.streamer is not None and self.streamer.retired:
                await close_abandoned(self._runtime, self._inbound, feed.stream.message_ids, ending)


def typing_indicator(channels: ChannelSet, inbound: Inbound, after_s: float) -> TurnHook:
    """Return a hook showing the typing indicator once the turn has run `after_s`, then every few seconds.

    The grace keeps quick answers from paying for an indicator that would be cancelled
    mid-request (and, on Discord, cost a connection) before anyone could see it; until it
    passes, the hook holds only a timer, no task. The channel's adapter is looked up at each
    indicator (a SIGHUP restart swaps it mid-turn), and none is shown while it is down.
    """
    return _Typing(channels, inbound, after_s)


class _Typing:
    """The typing indicator as a turn hook: a timer until `after_s`, then a task, both gone at exit."""

    __slots__ = ("_channels", "_inbound", "_after_s", "_timer", "_task")

    def __init__(self, channels: ChannelSet, inbound: Inbound, after_s: float) -> None:
        self._channels, self._inbound, self._after_s = channels, inbound, after_s
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def __call__(self, _turn: Turn) -> _Typing:
        return self

    async def __aenter__(self) -> None:
        if self._after_s > 0:
            self._timer = asyncio.get_running_loop().call_later(self._after_s, self._start)
        else:
            self._start()

    async def __aexit__(self, *_: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self._keep_typing())

    async def _keep_typing(self) -> None:
        channels, inbound = self._channels, self._inbound
        while True:
            adapter = channels.adapter(inbound.channel)
            if adapter is not None:
                try:
                    await adapter.typing(inbound.chat, inbound.thread)
                except ChannelError as exc:
                    logger.debug("typing indicator failed: {}", exc)
            await asyncio.sleep(_TYPING_EVERY_S)


def _log_turn(inbound: Inbound, agent: str, result: TurnResult | None, seconds: float) -> None:
    """One line per answered turn (never the message text): `log_turn`, as the gateway's turns."""
    log_turn(
        channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, agent=agent, result=result, seconds=seconds
    )
