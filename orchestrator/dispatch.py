"""start_channels() and process_message(): the only way an inbound message reaches an agent."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from loguru import logger

from channels import (
    ApprovalAnswer,
    ApprovalPrompt,
    ChannelError,
    Inbound,
    Outbound,
    create_adapter,
)
from channels.supervisor import supervise
from orchestrator.config import Config, SecretRef
from orchestrator.config.channels import RouteConfig
from orchestrator.engine import TurnResult, run_tool_call_loop
from orchestrator.errors import ConfigProblem, SecretError
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Verdict
from orchestrator.replies import deliver_reply, fit_reply, resume_reply
from orchestrator.routing import match_route, session_key
from orchestrator.runtime import ChannelHandle, PendingApproval, Runtime, SessionState
from orchestrator.seam import SESSION_COMMANDS, SOP_COMMAND, ChatCommands, build_channel, resolve_chat_commands
from orchestrator.store import InboxRow

if TYPE_CHECKING:
    from channels import ChannelAdapter

__all__ = [
    "Admitted",
    "Disposition",
    "admit",
    "channel_secret_problems",
    "deliver",
    "process_message",
    "replay_unfinished",
    "start_channels",
]

_TYPING_EVERY_S: Final = 4.0
_INSTANT_COMMANDS: Final = frozenset(SESSION_COMMANDS)
_COMMANDS: Final = _INSTANT_COMMANDS | {SOP_COMMAND}
_REFUSED: Final = "Only the person who asked, or a configured approver, can answer this approval."
_T = TypeVar("_T")


class Disposition(enum.Enum):
    """What happened to one inbound message."""

    ANSWERED = "answered"
    NO_ROUTE = "no_route"
    DUPLICATE = "duplicate"
    COMMAND = "command"
    STOPPED = "stopped"
    NOT_ACCEPTING = "not_accepting"
    BUSY = "busy"
    FAILED = "failed"


def channel_secret_problems(config: Config, lookup: Callable[[SecretRef], str]) -> list[ConfigProblem]:
    """Resolve every channel's secrets now; one problem per reference that does not resolve.

    Secrets are resolved where they are used (the daemon's environment, not `check`'s), so
    the daemon asks before it starts or swaps in a reloaded config: a missing token is one
    clear line, never a traceback or a half-applied reload.
    """
    shown = str(config.source or "<config>")
    problems: list[ConfigProblem] = []
    for name, settings in config.channels.items():
        for key, value in settings:
            if isinstance(value, SecretRef):
                try:
                    lookup(value)
                except SecretError as exc:
                    problems.append(ConfigProblem(shown, f"channels.{name}.{key}", str(exc)))
    return problems


async def start_channels(runtime: Runtime, *, ready_timeout_s: float = 30.0) -> None:
    """Launch one supervised adapter per configured channel.

    Returns when each is receiving or has failed for good, or after `ready_timeout_s`
    (a channel still connecting keeps retrying in the background).
    """
    for name, settings in runtime.config.channels.items():
        start_channel(runtime, name, settings)
    waits = [h.settled.wait() for h in runtime.channels.values()]
    try:
        async with asyncio.timeout(ready_timeout_s):
            await asyncio.gather(*waits)
    except TimeoutError:
        late = [n for n, h in runtime.channels.items() if not h.settled.is_set()]
        logger.warning("channels not ready after {}s, still trying: {}", ready_timeout_s, ", ".join(late))


def start_channel(
    runtime: Runtime, name: str, settings: Any, *, adapter: ChannelAdapter | None = None
) -> ChannelHandle:
    """Create (unless given) and supervise one channel's adapter in the runtime's TaskGroup."""
    if adapter is None:
        adapter = create_adapter(name, settings, secrets=runtime.secret)
    handle = ChannelHandle(name=name, kind=settings.kind, settings=settings, adapter=adapter)
    runtime.channels[name] = handle

    def ready() -> None:
        handle.ready.set()
        handle.settled.set()

    def failed(exc: BaseException) -> None:
        handle.failed = exc
        handle.settled.set()

    async def on_delivery(item: Inbound | ApprovalAnswer) -> None:
        await deliver(runtime, item)

    handle.task = runtime.spawn(
        supervise(adapter, on_delivery, on_ready=ready, on_fatal=failed), name=f"channel:{name}"
    )
    return handle


async def stop_channel(runtime: Runtime, name: str) -> None:
    """Stop receiving on one channel and close its adapter."""
    handle = runtime.channels.pop(name, None)
    if handle is None:
        return
    if handle.task is not None:
        handle.task.cancel()
    await handle.adapter.aclose()


async def deliver(runtime: Runtime, item: Inbound | ApprovalAnswer) -> None:
    """Adapter callback: returns once the message is durably accepted (or dropped).

    Routing, de-duplication and the inbox write happen right here, without waiting for
    the event loop, so an adapter delivering one message at a time is never starved. The
    turn then runs in the runtime's TaskGroup; turns of one session start in arrival order
    (tasks start in creation order and the session lock is FIFO).
    """
    if isinstance(item, ApprovalAnswer):
        # Answered off the adapter's call: the platform wants a button press acknowledged
        # within seconds (Slack and Discord: 3 s), and telling the presser may be slow.
        runtime.spawn(answer_approval(runtime, item), name=f"answer:{item.request_id}")
        return
    admitted = admit(runtime, item)
    if isinstance(admitted, Admitted):
        runtime.spawn(
            process_message(runtime, item, admitted=admitted), name=f"msg:{item.channel}:{item.event_id}"
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """A message past routing and the inbox write (or a chat command), ready to handle."""

    config: Config
    route: RouteConfig
    key: str
    command: str | None
    # A chat message's place in its session (taken at admission, so a burst is counted in
    # arrival order before any turn task runs); `process_message` releases it. None for commands.
    state: SessionState | None = None
    # Set instead of `state` when the session already has `max_queued_per_session` waiting.
    busy: int | None = None


def admit(runtime: Runtime, inbound: Inbound, *, replay: bool = False) -> Admitted | Disposition:
    """Route, de-duplicate and durably accept one message; return why it stops here otherwise.

    This is the durability point: once it returns `Admitted`, the message (chat commands
    too, so a redelivered `/sop` never runs twice) is in the inbox and the platform may be
    told it was received. While the daemon is stopping, messages are still stored but left
    pending for the next start (`/new` and `/stop` still act at once). `replay` re-admits a
    message a previous process accepted but never started.
    """
    config = runtime.config  # one generation for the whole turn
    match = match_route(config, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender)
    if match is None:
        logger.info(
            "no route for {} chat {} sender {}: ignored", inbound.channel, inbound.chat, inbound.sender
        )
        return Disposition.NO_ROUTE
    route = match.route
    key = session_key(route, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, thread=inbound.thread)
    command = inbound.text.strip().split(maxsplit=1)[0].lower() if inbound.text.strip() else ""
    if not replay and not runtime.store.accept(inbound.channel, inbound.event_id, dataclasses.asdict(inbound)):
        logger.info("duplicate delivery {} {}: ignored", inbound.channel, inbound.event_id)
        return Disposition.DUPLICATE
    if command in _INSTANT_COMMANDS:  # /new and /stop act at once, also while stopping
        return Admitted(config=config, route=route, key=key, command=command)
    if not runtime.accepting:
        return Disposition.NOT_ACCEPTING
    if command in _COMMANDS:
        return Admitted(config=config, route=route, key=key, command=command)
    state = runtime.session(key)
    waiting = state.users - 2  # besides this message, one is running or about to
    if waiting >= config.daemon.max_queued_per_session:
        runtime.release(state)
        return Admitted(config=config, route=route, key=key, command=None, busy=waiting)
    return Admitted(config=config, route=route, key=key, command=None, state=state)


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
    config, route, key = admitted.config, admitted.route, admitted.key
    if admitted.busy is not None:
        runtime.store.mark(inbound.channel, inbound.event_id, "done")
        note = (
            f"I still have {admitted.busy} of your messages to answer, so I did not take this one. "
            "Please send it again once I have caught up (or /stop the current answer)."
        )
        await _reply(runtime, inbound, note)
        return Disposition.BUSY
    if admitted.command in _INSTANT_COMMANDS:
        runtime.store.mark(inbound.channel, inbound.event_id, "done")
        await _command(runtime, inbound, key, admitted.command)
        return Disposition.COMMAND
    if admitted.command == SOP_COMMAND:
        await _sop_command(runtime, config, route, inbound, key)
        return Disposition.COMMAND
    state = admitted.state
    if state is None:  # admit gives every chat message one
        raise RuntimeError(f"message {inbound.event_id} was admitted without its session place")
    try:
        async with state.lock:
            if not runtime.accepting:  # stopping: leave it pending for the next start
                return Disposition.NOT_ACCEPTING
            try:
                return await _run_turn(runtime, config, route, inbound, key, state)
            except Exception as exc:  # a bug in one turn must not leave the user in silence
                logger.opt(exception=exc).error("turn for {} failed", inbound.event_id)
                runtime.store.mark(inbound.channel, inbound.event_id, "done")
                await _reply(runtime, inbound, "Sorry, something went wrong while answering; the error is logged.")
                return Disposition.FAILED
    finally:
        runtime.release(state)


async def _run_turn(
    runtime: Runtime, config: Any, route: RouteConfig, inbound: Inbound, key: str, state: Any
) -> Disposition:
    handle = runtime.channels[inbound.channel]
    adapter = handle.adapter
    execution = build_channel(config, route.agent, runtime.services)
    keep = execution.knobs.max_history_messages
    entry = runtime.transcript(key, route.agent, keep=keep)
    commands = resolve_chat_commands(config, route)
    # A turn's approvals (its delegates' too, which the routed agent's policy granted) are the
    # routed agent's: the requester or the route's approvers answer them.
    approver = ChannelApprover(
        runtime, adapter, inbound, answerers=lambda _: commands.answerers(route.agent, inbound.sender)
    )
    runtime.store.mark(inbound.channel, inbound.event_id, "running")
    started = time.monotonic()
    # In flight until the reply is sent (or kept for the next start), so a drain waits for
    # the send too instead of cancelling a reply it already waited for.
    runtime.turn_started()
    try:
        try:
            async with asyncio.TaskGroup() as group:
                turn = group.create_task(
                    run_tool_call_loop(
                        execution, entry.transcript, inbound.text, approver=approver,
                        actor=f"{inbound.channel}:{inbound.sender}",
                    )
                )
                state.current = turn
                typing = group.create_task(_keep_typing(adapter, inbound, handle.settings.typing_after_s))
                try:
                    result = await _stoppable(turn)
                finally:
                    typing.cancel()
        except asyncio.CancelledError:
            # the daemon is stopping: keep what the turn did; the row stays "running" so the
            # next start closes it and tells the user (the adapters are already stopped now)
            runtime.persist(entry, keep=keep)
            raise
        finally:
            state.current = None
        runtime.persist(entry, keep=keep)
        _log_turn(inbound, route.agent, result, time.monotonic() - started)
        if result is None:
            await deliver_reply(runtime, inbound, "Stopped.", reply_to=False)
            return Disposition.STOPPED
        await deliver_reply(runtime, inbound, fit_reply(result.text or "(no reply)", config.daemon.max_reply_chars))
        return Disposition.ANSWERED
    finally:
        runtime.turn_finished()


def _log_turn(inbound: Inbound, agent: str, result: TurnResult | None, seconds: float) -> None:
    """One line per answered turn (never the message text); JSON logs carry the fields too."""
    stop = "stopped by /stop" if result is None else result.stop.value
    tools = ",".join(result.executed) if result is not None and result.executed else "none"
    incident = result.incident if result is not None else None
    logger.bind(
        channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, agent=agent, stop=stop,
        seconds=round(seconds, 3), tools=tools, incident=incident,
    ).info(
        "turn {}:{} from {} by {}: {}{} in {:.2f}s, tools run: {}",
        inbound.channel, inbound.chat, inbound.sender, agent, stop,
        f" (incident {incident})" if incident else "", seconds, tools,
    )


async def _stoppable(turn: asyncio.Task[_T]) -> _T | None:
    """Await a turn; None when `/stop` cancelled it (the caller's own cancellation propagates)."""
    try:
        return await turn
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        return None


async def _sop_command(runtime: Runtime, config: Any, route: RouteConfig, inbound: Inbound, key: str) -> None:
    """`/sop NAME [context]`: run an SOP the route grants in this chat's session.

    Approvals are asked in the chat: the routed agent's steps answered by the requester or
    the route's approvers, every other agent's steps by the route's approvers only (the seam's
    `ChatCommands.answerers`). An SOP the route does not list never runs a step.
    """
    from orchestrator.policy import Interactivity
    from orchestrator.sop import SopStatus, run_sop

    adapter = runtime.channels[inbound.channel].adapter
    parts = inbound.text.strip().split(maxsplit=2)

    async def reply(text: str) -> None:
        await _send(adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=text, reply_to=inbound.message_id))

    def done() -> None:
        runtime.store.mark(inbound.channel, inbound.event_id, "done")

    commands = resolve_chat_commands(config, route)
    if len(parts) < 2 or not commands.may_start(parts[1]):
        done()
        await reply(_not_available(parts[1] if len(parts) > 1 else None, commands))
        return

    def answerers(request: ApprovalRequest) -> frozenset[str]:
        return commands.answerers(request.agent, inbound.sender)

    def refusal(request: ApprovalRequest) -> str:
        if request.agent == route.agent:
            return _REFUSED
        return f"Only a route approver can answer this approval: it is for a step of agent {request.agent!r}."
    state = runtime.session(key)
    try:
        async with state.lock:
            if not runtime.accepting:  # stopping: leave it pending for the next start
                return
            # "running" until it ends: a crash meanwhile makes the next start tell the user
            runtime.store.mark(inbound.channel, inbound.event_id, "running")
            runtime.turn_started()
            try:
                async with asyncio.TaskGroup() as group:
                    task = group.create_task(
                        run_sop(
                            config, parts[1], services=runtime.services,
                            approver=ChannelApprover(runtime, adapter, inbound, answerers=answerers, refusal=refusal),
                            interactivity=Interactivity.CHANNEL_PROMPT,
                            context=parts[2] if len(parts) > 2 else "", initiator=route.agent,
                            actor=f"{inbound.channel}:{inbound.sender}", session=key,
                        )
                    )
                    state.current = task
                    result = await _stoppable(task)
            except Exception as exc:  # a bug in one SOP must not leave the user in silence
                logger.opt(exception=exc).error("SOP {} failed", parts[1])
                done()
                await reply("Sorry, something went wrong while running the SOP; the error is logged.")
                return
            finally:
                state.current = None
                runtime.turn_finished()
    finally:
        runtime.release(state)
    done()
    if result is None:
        await reply("Stopped.")
    elif result.status is SopStatus.COMPLETED:
        await reply(result.output or "(no reply)")
    else:
        await reply(f"SOP {parts[1]!r} {result.status.value}: {result.message}")


def _not_available(name: str | None, commands: ChatCommands) -> str:
    """Answer a `/sop` this route does not grant, naming only the SOPs it does."""
    here = f" (available here: {', '.join(commands.sops)})" if commands.sops else " (no SOP is available here)"
    if name is None:
        return "Usage: /sop NAME [context]" + here
    return f"SOP {name!r} is not available here{here}."


async def _command(runtime: Runtime, inbound: Inbound, key: str, command: str) -> None:
    adapter = runtime.channels[inbound.channel].adapter
    if command == "/new":
        runtime.forget_session(key)
        text = "Started a new session."
    else:
        state = runtime.sessions.get(key)
        if state is not None and state.current is not None and not state.current.done():
            state.current.cancel()
            return  # the turn itself reports "Stopped."
        text = "Nothing is running."
    await _send(adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=text))


async def _keep_typing(adapter: ChannelAdapter, inbound: Inbound, after_s: float) -> None:
    """Show the typing indicator once the turn has run `after_s`, then every few seconds.

    The grace keeps quick answers from paying for an indicator that would be cancelled
    mid-request (and, on Discord, cost a connection) before anyone could see it.
    """
    if after_s > 0:
        await asyncio.sleep(after_s)
    while True:
        try:
            await adapter.typing(inbound.chat, inbound.thread)
        except ChannelError as exc:
            logger.debug("typing indicator failed: {}", exc)
        await asyncio.sleep(_TYPING_EVERY_S)


async def _reply(runtime: Runtime, inbound: Inbound, text: str) -> None:
    """Tell the chat `inbound` came from (nothing when its channel is gone)."""
    handle = runtime.channels.get(inbound.channel)
    if handle is not None:
        await _send(handle.adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=text))


async def _send(adapter: ChannelAdapter, message: Outbound) -> None:
    try:
        await adapter.send(message)
    except ChannelError as exc:
        logger.error("could not send to {} chat {}: {}", adapter.name, message.chat, exc.reason)


class ChannelApprover:
    """Asks in the chat the request came from; only the senders `answerers` names may answer.

    `answerers` is the route's decision (the seam's `ChatCommands.answerers`); when it names
    nobody, nobody is asked and the call is not run ("no operator decided").
    """

    def __init__(
        self,
        runtime: Runtime,
        adapter: ChannelAdapter,
        inbound: Inbound,
        *,
        answerers: Callable[[ApprovalRequest], frozenset[str]],
        refusal: Callable[[ApprovalRequest], str] = lambda _: _REFUSED,
    ) -> None:
        self.runtime, self.adapter, self.inbound = runtime, adapter, inbound
        self.answerers, self.refusal = answerers, refusal

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        allowed = self.answerers(request)
        if not allowed:
            note = (
                f"Approval {request.request_id} ({request.tool}) is for agent {request.agent!r}: only a route "
                "approver may answer it and this route has none, so it was not run."
            )
            await _send(self.adapter, Outbound(chat=self.inbound.chat, thread=self.inbound.thread, text=note))
            return ApprovalDecision(
                verdict=Verdict.NO_DECISION, decided_by=None,
                reason=f"only a route approver may approve agent {request.agent!r} here, and the route has none",
            )
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self.runtime.approvals[request.request_id] = PendingApproval(
            channel=self.inbound.channel,
            chat=self.inbound.chat,
            thread=self.inbound.thread,
            allowed=allowed,
            future=future,
            refusal=self.refusal(request),
        )
        try:
            if self.inbound.sender not in allowed:  # say who decides before the buttons appear
                note = (
                    f"Approval {request.request_id} is for agent {request.agent!r}: only a route approver "
                    f"({', '.join(sorted(allowed))}) can answer it."
                )
                await _send(self.adapter, Outbound(chat=self.inbound.chat, thread=self.inbound.thread, text=note))
            await self.adapter.prompt_approval(
                ApprovalPrompt(
                    request_id=request.request_id,
                    chat=self.inbound.chat,
                    thread=self.inbound.thread,
                    requester=self.inbound.sender,
                    tool=request.tool,
                    arguments=request.shown,
                    timeout_s=request.timeout_s,
                )
            )
            return await future
        finally:
            self.runtime.approvals.pop(request.request_id, None)
            if not future.done() or future.cancelled():  # awaiting it was cancelled: nobody answered
                future.cancel()
                note = f"No answer on approval {request.request_id} ({request.tool}) in time: it was not run."
                self.runtime.spawn(
                    _send(self.adapter, Outbound(chat=self.inbound.chat, thread=self.inbound.thread, text=note))
                )


async def answer_approval(runtime: Runtime, answer: ApprovalAnswer) -> None:
    """Resolve a pending approval if the person answering may; tell them otherwise."""
    pending = runtime.approvals.get(answer.request_id)
    handle = runtime.channels.get(answer.channel)
    chat = answer.chat or (pending.chat if pending else None)

    thread = pending.thread if pending is not None else None

    async def tell(text: str) -> None:
        if handle is not None and chat is not None:
            await _send(handle.adapter, Outbound(chat=chat, thread=thread, text=text))

    if pending is None or pending.channel != answer.channel or pending.future.done():
        await tell(f"There is no pending approval {answer.request_id}.")
        return
    if answer.sender not in pending.allowed:
        logger.warning("{} may not answer approval {}", answer.sender, answer.request_id)
        await tell(pending.refusal)
        return
    verdict = Verdict.APPROVED if answer.approved else Verdict.DENIED
    pending.future.set_result(
        ApprovalDecision(
            verdict=verdict,
            decided_by=f"{answer.channel}:{answer.sender}",
            reason="approved in chat" if answer.approved else "denied in chat",
        )
    )


async def replay_unfinished(runtime: Runtime, rows: list[InboxRow]) -> None:
    """Finish what the previous process accepted: run pending messages, close interrupted turns.

    `rows` must be read (`runtime.store.unfinished()`) before channels start, so messages
    this process accepts are never mistaken for the previous one's.
    """
    for row in rows:
        inbound = Inbound(**row.body)
        if inbound.channel not in runtime.channels:
            logger.warning("channel {} is gone; dropping accepted message {}", inbound.channel, inbound.event_id)
            runtime.store.mark(row.channel, row.event_id, "interrupted")
            continue
        if row.state == "pending":
            runtime.spawn(process_message(runtime, inbound, replay=True), name=f"replay:{row.event_id}")
            continue
        if row.state == "replying" and row.reply is not None:  # the turn finished; send the rest
            runtime.spawn(resume_reply(runtime, inbound, row.reply, sent=row.sent), name=f"resend:{row.event_id}")
            continue
        # The turn itself was cut off: its notice is this message's reply, under the same
        # protocol, so it is sent once even if this start is killed too.
        preview = inbound.text if len(inbound.text) <= 80 else inbound.text[:77] + "..."
        notice = (
            f"I was restarted while answering \"{preview}\" and could not finish. "
            "Please send it again if you still need it."
        )
        runtime.spawn(resume_reply(runtime, inbound, notice, sent=0, notice=True), name=f"notice:{row.event_id}")
