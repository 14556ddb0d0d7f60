"""Approvals asked in a chat: the `ChannelApprover`, the pending prompts, and the answers to them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from loguru import logger

from channels import ApprovalAnswer, ApprovalPrompt, ChannelAdapter, ChannelError, Inbound, Outbound, chunk_text
from orchestrator.daemon.channels import ChannelSet
from orchestrator.policy import ApprovalArguments, ApprovalDecision, ApprovalRequest, Verdict, shown_name

__all__ = ["REFUSED", "Approvals", "ChannelApprover", "PendingApproval", "answer_approval", "send", "whole_call"]

REFUSED: Final = "Only the person who asked, or a configured approver, can answer this approval."
# `/show ID` sends at most this many messages; a longer call is refused whole rather than half shown.
MAX_SHOW_MESSAGES: Final = 40
_FENCE: Final = "```"


@dataclass(eq=False)
class PendingApproval:
    """An approval prompt waiting in a chat; only `allowed` senders may answer it."""

    channel: str
    chat: str
    thread: str | None
    allowed: frozenset[str]
    future: asyncio.Future[ApprovalDecision]
    refusal: str  # what a sender who may not answer it is told
    tool: str  # as shown (escaped)
    shown: ApprovalArguments  # the whole call, for `/show ID`


class Approvals:
    """The approval prompts waiting for an answer, by request id."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingApproval] = {}
        self._asked_at: dict[str, float] = {}  # wall-clock seconds each prompt began waiting

    def __len__(self) -> int:
        return len(self._pending)

    def oldest_asked_at(self) -> float | None:
        """Return when the longest-waiting prompt was asked (wall-clock seconds), None with none waiting."""
        return min(self._asked_at.values(), default=None)

    def get(self, request_id: str) -> PendingApproval | None:
        """Return the pending approval `request_id`, if it still waits."""
        return self._pending.get(request_id)

    def add(self, request_id: str, pending: PendingApproval) -> None:
        """Wait for an answer to `request_id`."""
        self._pending[request_id] = pending
        self._asked_at.setdefault(request_id, time.time())

    def discard(self, request_id: str) -> None:
        """Stop waiting for `request_id`."""
        self._pending.pop(request_id, None)
        self._asked_at.pop(request_id, None)

    def cancel_all(self) -> None:
        """Cancel every wait (the runtime is closing)."""
        for pending in self._pending.values():
            pending.future.cancel()


async def send(adapter: ChannelAdapter, message: Outbound) -> None:
    """Send `message`, logging (never raising) a platform failure."""
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
        *,
        approvals: Approvals,
        spawn: Callable[[Coroutine[Any, Any, Any]], object],
        channels: ChannelSet,
        inbound: Inbound,
        answerers: Callable[[ApprovalRequest], frozenset[str]],
        refusal: Callable[[ApprovalRequest], str] = lambda _: REFUSED,
    ) -> None:
        self.approvals, self.spawn, self.channels, self.inbound = approvals, spawn, channels, inbound
        self.answerers, self.refusal = answerers, refusal

    def _adapter(self) -> ChannelAdapter:
        # Looked up at each use, never kept: a SIGHUP restart of the channel swaps its adapter
        # while this turn runs, and the old one is closed.
        adapter = self.channels.adapter(self.inbound.channel)
        if adapter is None:
            raise ChannelError(self.inbound.channel, "the channel is not connected")
        return adapter

    async def _say(self, text: str) -> None:
        try:
            adapter = self._adapter()
        except ChannelError as exc:
            logger.error("could not send to chat {}: {}", self.inbound.chat, exc)
            return
        await send(adapter, Outbound(chat=self.inbound.chat, thread=self.inbound.thread, text=text))

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask in the chat and wait; a prompt the chat could not be shown is denied, and the chat told why."""
        allowed = self.answerers(request)
        tool = shown_name(request.tool)
        if not allowed:
            await self._say(
                f"Approval {request.request_id} ({tool}) is for agent {request.agent!r}: only a route "
                "approver may answer it and this route has none, so it was not run."
            )
            return ApprovalDecision(
                verdict=Verdict.NO_DECISION, decided_by=None,
                reason=f"only a route approver may approve agent {request.agent!r} here, and the route has none",
            )
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self.approvals.add(
            request.request_id,
            PendingApproval(
                channel=self.inbound.channel,
                chat=self.inbound.chat,
                thread=self.inbound.thread,
                allowed=allowed,
                future=future,
                refusal=self.refusal(request),
                tool=tool,
                shown=request.shown,
            ),
        )
        shown = False
        try:
            if self.inbound.sender not in allowed:  # say who decides before the buttons appear
                await self._say(
                    f"Approval {request.request_id} is for agent {request.agent!r}: only a route approver "
                    f"({', '.join(sorted(allowed))}) can answer it."
                )
            prompt = ApprovalPrompt(
                request_id=request.request_id,
                chat=self.inbound.chat,
                thread=self.inbound.thread,
                requester=shown_name(self.inbound.sender),
                tool=tool,
                arguments=request.shown,
                timeout_s=request.timeout_s,
            )
            try:
                await self._adapter().prompt_approval(prompt)
            except Exception as exc:  # refused, or a text the platform cannot carry: never "no answer"
                return await self._not_shown(request, tool, exc)
            shown = True
            return await future
        finally:
            self.approvals.discard(request.request_id)
            if not future.done() or future.cancelled():  # awaiting it was cancelled: nobody answered
                future.cancel()
                if shown:
                    self.spawn(self._say(f"No answer on approval {request.request_id} ({tool}) in time: it was not run."))

    async def _not_shown(self, request: ApprovalRequest, tool: str, exc: Exception) -> ApprovalDecision:
        """Deny a call whose prompt could not be posted, and say so (the audit row keeps the reason)."""
        reason = shown_name(exc.reason if isinstance(exc, ChannelError) else f"{type(exc).__name__}: {exc}")
        # a platform's refusal is one line; anything else is a bug here, logged with its traceback
        log = logger if isinstance(exc, ChannelError) else logger.opt(exception=exc)
        log.warning("approval {} ({}) could not be shown: {}", request.request_id, tool, reason)
        await self._say(f"Approval {request.request_id} ({tool}) could not be shown in this chat ({reason}): it was not run.")
        return ApprovalDecision(
            verdict=Verdict.NO_DECISION, decided_by=None, asked=True,
            reason=f"the approval prompt could not be shown ({reason})",
        )


def whole_call(request_id: str, pending: PendingApproval, *, limit: int) -> list[str]:
    """Return the messages that show `pending`'s whole call, one argument a line, each at most `limit`.

    Each message is a code block headed `(i/n)`, so markup in a value is shown, never applied;
    a run of backticks in a value is broken by an escaped one (`\\u0060`), so no value can
    close the block. `limit` is the platform's message limit; with characters past the BMP
    (two UTF-16 units each on Telegram) pieces take half of it.
    """
    body = "\n".join(pending.shown.lines()).replace(_FENCE[:2], "`\\u0060")
    size = limit // 2 if any(ord(c) > 0xFFFF for c in body) else limit
    head = f"Approval {request_id} ({pending.tool}), the whole call ({{}}/{{}}):\n{_FENCE}\n"
    room = size - len(head.format(MAX_SHOW_MESSAGES, MAX_SHOW_MESSAGES)) - len(_FENCE) - 1
    pieces = chunk_text(body, room)
    if len(pieces) > MAX_SHOW_MESSAGES:
        return [
            f"Approval {request_id} ({pending.tool}): the whole call is {len(body):,} characters, more than "
            f"{MAX_SHOW_MESSAGES} messages here, so it is not sent. Deny it unless you can check it another way."
        ]
    return [head.format(i, len(pieces)) + piece + "\n" + _FENCE for i, piece in enumerate(pieces, 1)]


async def answer_approval(approvals: Approvals, channels: ChannelSet, answer: ApprovalAnswer) -> None:
    """Resolve a pending approval if the person answering may; tell them otherwise."""
    pending = approvals.get(answer.request_id)
    channel = channels.get(answer.channel)
    chat = answer.chat or (pending.chat if pending else None)
    thread = pending.thread if pending is not None else None

    async def tell(text: str) -> None:
        if channel is not None and chat is not None:
            await send(channel.adapter, Outbound(chat=chat, thread=thread, text=text))

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
