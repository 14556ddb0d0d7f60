"""A chat message's turn: `Sessions.run_turn` with the channel's hooks (typing indicator, reply)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Final

from loguru import logger

from channels import ChannelAdapter, ChannelError, Inbound, Outbound, StreamingAdapter
from orchestrator.daemon.admission import Admitted, Disposition
from orchestrator.daemon.approvals import ChannelApprover
from orchestrator.daemon.replies import deliver_reply, fit_reply
from orchestrator.daemon.runtime import Runtime
from orchestrator.daemon.streaming import StreamFeed
from orchestrator.engine import TurnResult
from orchestrator.seam import build_channel, resolve_chat_commands
from orchestrator.sessions import SessionState, Turn, TurnHook

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
        approvals=runtime.approvals, spawn=runtime.spawn, adapter=channel.adapter, inbound=inbound,
        answerers=lambda _: commands.answerers(route.agent, inbound.sender),
    )

    reply = _Reply(runtime, inbound, route.agent, config.daemon.max_reply_chars)
    feed = reply.feed = _open_stream(runtime, channel.adapter, channel.settings.stream, inbound, config.daemon.max_reply_chars)
    try:
        turn = await runtime.sessions.run_turn(
            state,
            agent=route.agent,
            execution=lambda: build_channel(config, route.agent, runtime.services),
            text=inbound.text,
            approver=approver,
            actor=f"{inbound.channel}:{inbound.sender}",
            events=feed,
            stream=feed is not None,
            hooks=(reply, typing_indicator(channel.adapter, inbound, channel.settings.typing_after_s)),
            gate=lambda: runtime.accepting,  # stopping: leave it pending for the next start
        )
    except Exception as exc:
        if not reply.told:
            raise
        # The stream already ended with the apology: the user is told once, not twice.
        logger.opt(exception=exc).error("turn for {} failed", inbound.event_id)
        runtime.store.mark(inbound.channel, inbound.event_id, "done")
        return Disposition.FAILED
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
    return StreamFeed(
        stream=stream, cap=cap, on_messages=lambda ids: store.stream_messages(channel, event_id, ids)
    )


class _Reply:
    """The turn hook that sends the reply: whole at the end, or streamed as the model writes.

    A plain object (one per turn), not a generator context manager: this runs on every turn.
    """

    __slots__ = ("_runtime", "_inbound", "_agent", "_limit", "_turn", "_started", "_counted", "feed", "told")

    def __init__(self, runtime: Runtime, inbound: Inbound, agent: str, limit: int) -> None:
        self._runtime, self._inbound, self._agent, self._limit = runtime, inbound, agent, limit
        self._turn: Turn | None = None
        self._started = 0.0
        self._counted = runtime.in_flight()
        self.feed: StreamFeed | None = None
        self.told = False  # the stream told the user the turn failed

    def __call__(self, turn: Turn) -> _Reply:
        self._turn = turn
        return self

    async def __aenter__(self) -> None:
        self._runtime.store.mark(self._inbound.channel, self._inbound.event_id, "running")
        self._started = time.monotonic()
        # In flight until the reply is sent (or kept for the next start), so a drain waits for
        # the send too instead of cancelling a reply it already waited for.
        await self._counted.__aenter__()
        if self.feed is not None:
            self.feed.started(self._runtime.spawn(self.feed.pump(), name=f"stream:{self._inbound.event_id}"))

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._finish(exc)
        finally:
            await self._counted.__aexit__(kind, exc, tb)

    async def _finish(self, exc: BaseException | None) -> None:
        turn, inbound, feed = self._turn, self._inbound, self.feed
        if feed is not None:
            await feed.close()
        if exc is not None:  # the turn failed (or the daemon is stopping: the next start closes it)
            if feed is not None and isinstance(exc, Exception):
                await _abort(feed, _FAILED)
                self.told = True
            return
        if turn is None:
            raise RuntimeError("the reply hook was entered without its turn")
        _log_turn(inbound, self._agent, turn.result, time.monotonic() - self._started)
        if turn.result is None:
            if feed is not None:
                await _abort(feed, "Stopped.")
                self._runtime.store.mark(inbound.channel, inbound.event_id, "done")
            else:
                await deliver_reply(self._runtime, inbound, "Stopped.", reply_to=False)
            return
        text = fit_reply(turn.result.text or "(no reply)", self._limit)
        await deliver_reply(self._runtime, inbound, text, stream=feed.stream if feed is not None else None)


_FAILED: Final = "Sorry, something went wrong while answering; the error is logged."


async def _abort(feed: StreamFeed, ending: str) -> None:
    """End a stream with `ending`; a platform failure here is logged (the turn is over anyway)."""
    try:
        await feed.stream.abort(ending)
    except ChannelError as exc:
        logger.warning("could not end a streamed reply ({}): {}", ending, exc.reason)


def typing_indicator(adapter: ChannelAdapter, inbound: Inbound, after_s: float) -> TurnHook:
    """Return a hook showing the typing indicator once the turn has run `after_s`, then every few seconds.

    The grace keeps quick answers from paying for an indicator that would be cancelled
    mid-request (and, on Discord, cost a connection) before anyone could see it.
    """

    async def keep_typing() -> None:
        if after_s > 0:
            await asyncio.sleep(after_s)
        while True:
            try:
                await adapter.typing(inbound.chat, inbound.thread)
            except ChannelError as exc:
                logger.debug("typing indicator failed: {}", exc)
            await asyncio.sleep(_TYPING_EVERY_S)

    return _Alongside(keep_typing)


class _Alongside:
    """A turn hook that only runs `work` beside the engine (a plain object: one per turn)."""

    __slots__ = ("_work",)

    def __init__(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._work = work

    def __call__(self, turn: Turn) -> _Alongside:
        turn.alongside(self._work)
        return self

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_: object) -> None:
        return None


def _log_turn(inbound: Inbound, agent: str, result: TurnResult | None, seconds: float) -> None:
    """One line per answered turn (never the message text); JSON logs carry the fields too."""
    stop = "stopped by /stop" if result is None else result.stop.value
    tools = ",".join(result.executed) if result is not None and result.executed else "none"
    incident = result.incident if result is not None else None
    failed_over = result is not None and result.failed_over
    fallback = f" (answered by fallback {result.provider}/{result.model})" if result is not None and failed_over else ""
    logger.bind(
        channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, agent=agent, stop=stop,
        seconds=round(seconds, 3), tools=tools, incident=incident,
        provider=result.provider if result is not None else None,
        model=result.model if result is not None else None, failed_over=failed_over,
    ).info(
        "turn {}:{} from {} by {}: {}{}{} in {:.2f}s, tools run: {}",
        inbound.channel, inbound.chat, inbound.sender, agent, stop,
        f" (incident {incident})" if incident else "", fallback, seconds, tools,
    )
