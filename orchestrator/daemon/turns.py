"""A chat message's turn: `Sessions.run_turn` with the channel's hooks (typing indicator, reply)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, nullcontext
from typing import Any, Final

from loguru import logger

from channels import ChannelAdapter, ChannelError, FileAdapter, Inbound
from orchestrator.daemon.admission import Admitted, Disposition
from orchestrator.daemon.approvals import ChannelApprover
from orchestrator.daemon.media import ChatFileOutlet, echo_transcripts, take_in_chat
from orchestrator.daemon.replies import deliver_reply, fit_reply
from orchestrator.daemon.runtime import Runtime
from orchestrator.engine import TurnResult
from orchestrator.media import MediaRefused
from orchestrator.seam import build_channel, resolve_chat_commands
from orchestrator.sessions import SessionState, Turn, TurnHook
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
        approvals=runtime.approvals, spawn=runtime.spawn, adapter=channel.adapter, inbound=inbound,
        answerers=lambda _: commands.answerers(route.agent, inbound.sender),
    )

    text = inbound.text
    media: tuple[dict[str, Any], ...] = ()
    outlet = ChatFileOutlet(adapter=channel.adapter, inbound=inbound) if isinstance(channel.adapter, FileAdapter) else None
    if inbound.attachments:
        try:
            execution = build_channel(config, route.agent, runtime.services)
            intake = await take_in_chat(channel.adapter, inbound, execution)
        except MediaRefused as refused:  # one clear line; nothing was kept
            runtime.sessions.release(state)
            await deliver_reply(runtime, inbound, refused.reason)
            return Disposition.ANSWERED
        except BaseException:
            runtime.sessions.release(state)
            raise
        text, media = intake.text, intake.media
        if intake.transcripts and execution.media.echo_transcript:
            await echo_transcripts(channel.adapter, inbound, intake.transcripts)

    @asynccontextmanager
    async def reply(turn: Turn) -> AsyncIterator[None]:
        runtime.store.mark(inbound.channel, inbound.event_id, "running")
        started = time.monotonic()
        # In flight until the reply is sent (or kept for the next start), so a drain waits for
        # the send too instead of cancelling a reply it already waited for.
        async with runtime.in_flight():
            yield  # the turn runs; it is persisted before we get here
            _log_turn(inbound, route.agent, turn.result, time.monotonic() - started)
            if turn.result is None:
                await deliver_reply(runtime, inbound, "Stopped.", reply_to=False)
            else:
                text = fit_reply(turn.result.text or "(no reply)", config.daemon.max_reply_chars)
                await deliver_reply(runtime, inbound, text)

    with bind_outlet(outlet) if outlet is not None else nullcontext():  # the chat `send_file` posts to
        turn = await runtime.sessions.run_turn(
            state,
            agent=route.agent,
            execution=lambda: build_channel(config, route.agent, runtime.services),
            text=text,
            approver=approver,
            actor=f"{inbound.channel}:{inbound.sender}",
            hooks=(reply, typing_indicator(channel.adapter, inbound, channel.settings.typing_after_s)),
            gate=lambda: runtime.accepting,  # stopping: leave it pending for the next start
            media=media,
        )
    return Disposition.STOPPED if turn.result is None else Disposition.ANSWERED


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
