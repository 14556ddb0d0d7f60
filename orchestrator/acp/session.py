"""One ACP session: its transcript, its open tool calls, and the client as its event sink and approver."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from orchestrator.engine import TextDelta, ToolCallFinished, ToolCallStarted, Transcript, TurnEvent
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Verdict

if TYPE_CHECKING:
    from acp import Client

    from orchestrator.acp.history import StoredTranscript

__all__ = ["AcpSession"]

_ALLOW: Final = "allow"
_REJECT: Final = "reject"
_OPTIONS: Final = (
    PermissionOption(option_id=_ALLOW, name="Allow", kind="allow_once"),
    PermissionOption(option_id=_REJECT, name="Reject", kind="reject_once"),
)


@dataclass(kw_only=True, eq=False)
class AcpSession:
    """A live session's state; its transcript is stored after every turn (see `AcpHistory`)."""

    session_id: str
    client: Client
    decided_by: str  # who answers approvals, as the audit log records it: "acp:<client name>"
    stored: StoredTranscript
    # Tool calls reported as started whose finish the client has not been told yet.
    open_calls: dict[str, str] = field(default_factory=dict)
    current_call: str | None = None
    # Whether the model's latest answer in this turn streamed text (reset when it calls tools).
    streamed: bool = False

    @property
    def transcript(self) -> Transcript:
        """Return the in-memory transcript (the history window)."""
        return self.stored.transcript

    async def say(self, text: str) -> None:
        """Stream one agent message chunk to the client."""
        await self.client.session_update(session_id=self.session_id, update=update_agent_message_text(text))

    async def on_event(self, event: TurnEvent) -> None:
        """Report tool calls as ACP tool-call updates and streamed text as message chunks."""
        if isinstance(event, TextDelta):
            self.streamed = True
            await self.say(event.text)
            return
        if isinstance(event, ToolCallStarted):
            self.streamed = False
            self.current_call = event.call_id
            self.open_calls[event.call_id] = event.tool
            update: Any = start_tool_call(
                event.call_id, event.tool, kind="other", status="pending", raw_input=_decoded(event.arguments)
            )
        elif isinstance(event, ToolCallFinished):
            self.open_calls.pop(event.call_id, None)
            update = update_tool_call(
                event.call_id,
                status="completed" if event.ran else "failed",
                content=[tool_content(text_block(event.output))],
                raw_output=event.output,
            )
        else:  # pragma: no cover - TurnEvent is a closed union
            return
        await self.client.session_update(session_id=self.session_id, update=update)

    async def fail_open_calls(self, why: str) -> None:
        """Tell the client that calls cut off by a cancellation never finished."""
        for call_id in list(self.open_calls):
            update = update_tool_call(call_id, status="failed", content=[tool_content(text_block(why))])
            await self.client.session_update(session_id=self.session_id, update=update)
        self.open_calls.clear()

    async def replay(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Send a stored conversation to the client: user and agent text, tool calls as completed."""
        results = {m["tool_call_id"]: _text(m.get("content")) for m in messages if m.get("role") == "tool"}
        for message in messages:
            for update in _replayed(message, results):
                await self.client.session_update(session_id=self.session_id, update=update)

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask the client through `session/request_permission` (an `Approver`)."""
        call = ToolCallUpdate(
            tool_call_id=self.current_call or request.request_id,
            title=request.tool,
            status="pending",
            raw_input=dict(request.arguments),
        )
        response = await self.client.request_permission(
            session_id=self.session_id, tool_call=call, options=list(_OPTIONS)
        )
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == _ALLOW:
            return ApprovalDecision(verdict=Verdict.APPROVED, decided_by=self.decided_by, reason="allowed in the ACP client")
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == _REJECT:
            return ApprovalDecision(verdict=Verdict.DENIED, decided_by=self.decided_by, reason="rejected in the ACP client")
        # A cancelled prompt, or an option we never offered: nobody decided.
        return ApprovalDecision(verdict=Verdict.NO_DECISION, decided_by=None, reason="the ACP client gave no decision")


def _replayed(message: Mapping[str, Any], results: Mapping[str, str]) -> Iterator[Any]:
    role = message.get("role")
    text = _text(message.get("content"))
    if role == "user" and text:
        yield update_user_message_text(text)
    if role != "assistant":
        return  # tool results travel with their call; system messages are never stored
    if text:
        yield update_agent_message_text(text)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        output = results.get(call.get("id", ""), "")
        yield start_tool_call(
            call.get("id", ""),
            function.get("name", "tool"),
            kind="other",
            status="completed",
            content=[tool_content(text_block(output))],
            raw_input=_decoded(function.get("arguments", "")),
            raw_output=output,
        )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _decoded(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
