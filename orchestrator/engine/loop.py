"""run_tool_call_loop: the engine; it runs only what a sealed execution grants (L1 locks)."""

from __future__ import annotations

import asyncio
import enum
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from loguru import logger

from orchestrator.media import MEDIA_KEY, model_messages
from orchestrator.providers import Completion, ToolCall
from orchestrator.engine.context import Assembled, ContextOverflow, assemble, calibrate, fold, image_tokens
from orchestrator.engine.events import (
    TextDelta,
    ToolCallApproval,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnEvents,
)
from orchestrator.engine.tokens import TokenAccount, TurnUsage
from orchestrator.engine.transcript import Transcript
from orchestrator.engine.shaping import shape_for_model
from orchestrator.errors import OrchestratorError, ProviderError, SealViolation, ToolFailure
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Approver, Verdict
from orchestrator.redaction import redact
from orchestrator.seam import CurrentTurn, ResolvedAgentExecution, current_turn, enter_turn, leave_turn
from orchestrator.tools import ChildOutcome, InvalidArguments

__all__ = ["StopReason", "TurnObserver", "TurnResult", "add_turn_observer", "run_tool_call_loop"]

_NO_PROGRESS_REPEATS: Final = 3
_PROVIDER_FAILED: Final = (
    "Sorry, the model provider failed (incident {incident}); the operator can find the details in the log."
)

TurnObserver = Callable[[ResolvedAgentExecution], None]
_observers: list[TurnObserver] = []


class StopReason(enum.Enum):
    """Why a turn ended."""

    COMPLETED = "completed"
    ITERATION_CAP = "iteration_cap"
    TIMEOUT = "timeout"
    NO_PROGRESS = "no_progress"
    PROVIDER_ERROR = "provider_error"
    TOKEN_BUDGET = "token_budget"
    CONTEXT_OVERFLOW = "context_overflow"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """What a turn produced: the reply text, why it stopped, and which tools actually ran.

    On a provider failure `text` is one generic line naming `incident`, for the user only:
    the transcript keeps the user's message but never this apology, so later turns do not
    re-send it to the model as something the assistant said. `error` holds the detail
    (URL, status, body) for operator-facing callers only (the CLI's stderr): never send it
    to a chat or store it.
    `provider` and `model` name the chain link that gave the turn's last answer (None when
    no model answered); `failed_over` is True when any answer of the turn came from a
    `fallback` link instead of the agent's own provider and model. `tokens` is what the
    turn's model calls used (input + output), its delegated turns' included; `usage` the
    same by kind (cache reads and writes), with the cost when priced.
    """

    text: str
    stop: StopReason
    executed: tuple[str, ...]
    error: str | None = None
    incident: str | None = None
    provider: str | None = None
    model: str | None = None
    failed_over: bool = False
    tokens: int = 0
    usage: TurnUsage = TurnUsage()


def add_turn_observer(observer: TurnObserver) -> Callable[[], None]:
    """Call `observer` with every execution a turn starts with; return a function removing it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


async def run_tool_call_loop(
    execution: ResolvedAgentExecution,
    transcript: Transcript,
    message: str,
    *,
    approver: Approver | None = None,
    actor: str | None = None,
    events: TurnEvents | None = None,
    stream: bool = False,
    media: Sequence[Mapping[str, Any]] = (),
) -> TurnResult:
    """Run one turn: model, tools it may call, model again, until a final answer or a budget.

    Only tools in `execution.tools` ever run; every call is re-checked against the
    execution's approvals and budgets; `actor` (the person the turn runs for, e.g. the
    channel sender) keys the hourly action budget together with the agent; `events`, when
    given, is awaited as each tool call starts and finishes, and with `stream` also with
    a `TextDelta` for every piece of model text as it arrives (the provider is asked to
    stream only then). `media` are the references of the message's attachments (the
    intake wrote them into the workspace): the transcript keeps them, and a vision model
    gets each image as a content part while the message is in the history window.
    Cancellation propagates after the transcript has been closed
    cleanly (every tool call answered).
    """
    if not ResolvedAgentExecution.minted(execution):
        raise SealViolation("the engine's execution argument")
    for observer in _observers:
        observer(execution)
    entry: dict[str, Any] = {"role": "user", "content": message}
    if media:
        entry[MEDIA_KEY] = [dict(ref) for ref in media]
    transcript.append(entry)
    turn = _Turn(execution, transcript, approver, actor, events, stream=stream)
    # Seam tools (delegate) read the caller's remaining budgets and approver from here,
    # and run a nested turn through `run_child`, so nothing below the engine imports it.
    outer = current_turn()

    async def run_child(child: ResolvedAgentExecution, task: str, *, session: str, parent: str) -> ChildOutcome:
        nested = Transcript(session=session, parent=parent)
        result = await run_tool_call_loop(child, nested, task, approver=approver, actor=actor)
        turn.tokens.add(result.tokens, result.usage)  # the child ran inside this turn's token budget
        return ChildOutcome(completed=result.stop is StopReason.COMPLETED, stop=result.stop.value, text=result.text)

    turn.scope = CurrentTurn(
        execution=execution, session=transcript.session, approver=approver, actor=actor,
        deadline=asyncio.get_running_loop().time() + execution.knobs.turn_timeout_s,
        depth=outer.depth + 1 if outer is not None else 0, runner=run_child, caller=outer,
    )
    token = enter_turn(turn.scope)
    try:
        async with asyncio.timeout_at(turn.scope.deadline):
            return await turn.run()
    except TimeoutError:
        turn.close_pending("the turn ran out of time")
        text = f"Stopped: this turn exceeded its time budget of {execution.knobs.turn_timeout_s:g}s."
        transcript.append({"role": "assistant", "content": text})
        return turn.result(text, StopReason.TIMEOUT)
    except asyncio.CancelledError:
        turn.close_pending("the turn was cancelled")
        raise
    finally:
        leave_turn(token)
        if outer is None:  # durable before the caller stores the transcript or sends the reply
            execution.usage.flush()


class _Turn:
    __slots__ = (
        "actor", "answered_by", "approver", "events", "executed", "execution", "failed_over", "folded", "images",
        "on_text", "pending", "scope", "tokens", "transcript",
    )

    def __init__(
        self,
        execution: ResolvedAgentExecution,
        transcript: Transcript,
        approver: Approver | None,
        actor: str | None = None,
        events: TurnEvents | None = None,
        *,
        stream: bool = False,
    ) -> None:
        self.execution = execution
        self.transcript = transcript
        self.approver = approver
        self.actor = actor
        self.events = events
        self.executed: list[str] = []
        self.pending: list[ToolCall] = []
        self.scope: CurrentTurn | None = None
        self.answered_by: tuple[str, str] | None = None
        self.failed_over = False
        self.tokens = TokenAccount(execution, actor=actor, session=transcript.session, turn=lambda: self.scope)
        self.folded = False  # one summarizing attempt per turn: a failing summarizer costs one timeout
        self.on_text: Callable[[str], Awaitable[None]] | None = (
            self._stream_text if stream and events is not None else None
        )

    def close_pending(self, why: str) -> None:
        for call in self.pending:
            self.transcript.append(
                {"role": "tool", "tool_call_id": call.id, "content": f"Error: not run: {why}."}
            )
        self.pending = []

    async def run(self) -> TurnResult:
        ex = self.execution
        knobs = ex.knobs
        prompt = "\n\n".join([ex.system_prompt, *await self._turn_context()]).strip()
        specs = ex.tools.provider_specs()
        last: tuple[str, str, str] | None = None
        repeats = 0
        iteration = 0
        while True:
            try:
                request = await self._request(prompt, specs)
            except ContextOverflow as exc:
                self.close_pending("the context budget is spent")
                return self._finish(f"Stopped: {exc}.", StopReason.CONTEXT_OVERFLOW)
            completion = await self._ask(request, specs)
            if isinstance(completion, TurnResult):
                return completion
            assistant: dict[str, Any] = {"role": "assistant", "content": completion.text}
            if not completion.tool_calls:
                self.transcript.append(assistant)
                return self.result(completion.text or "", StopReason.COMPLETED)
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in completion.tool_calls
            ]
            self.transcript.append(assistant)
            self.pending = list(completion.tool_calls)
            iteration += 1
            if self.scope is not None:
                self.scope.iteration = iteration
            if iteration > knobs.max_tool_iterations:
                self.close_pending(f"the tool-iteration budget ({knobs.max_tool_iterations}) is spent")
                return self._finish(
                    f"Stopped after {knobs.max_tool_iterations} tool iterations without a final answer.",
                    StopReason.ITERATION_CAP,
                )
            while self.pending:
                call = self.pending[0]
                await self._emit(ToolCallStarted(call_id=call.id, tool=call.name, arguments=call.arguments))
                ran_before = len(self.executed)
                output, source = await self._execute(call)
                ran = len(self.executed) > ran_before
                # What a tool gave (or raised) is cut to the cap; the engine's own refusals are not.
                cap = knobs.max_tool_result_chars if ran else None
                result = shape_for_model(output, cap=cap, untrusted=source)
                self.pending.pop(0)
                self.transcript.append({"role": "tool", "tool_call_id": call.id, "content": result})
                await self._emit(ToolCallFinished(call_id=call.id, tool=call.name, ran=ran, output=result))
                signature = (call.name, call.arguments, result)
                repeats = repeats + 1 if signature == last else 1
                last = signature
                if repeats >= _NO_PROGRESS_REPEATS:
                    self.close_pending("the model repeated a call that made no progress")
                    return self._finish(
                        f"Stopped: the model called {call.name!r} {repeats} times with the same "
                        "arguments and got the same result.",
                        StopReason.NO_PROGRESS,
                    )

    async def _ask(self, request: Assembled, specs: Sequence[Mapping[str, Any]]) -> Completion | TurnResult:
        # As the provider must see it: media references out, a vision agent's images as parts.
        # Their data URLs live only inside this block, under the daemon's image budget.
        ex = self.execution
        async with model_messages(
            request.messages, ex.security.workspace, vision=ex.media.vision, detail=ex.media.image_detail,
        ) as messages:
            # the token budget is checked on what is really sent: after the context is fitted;
            # the call asks for no more output than the tightest budget leaves (L1: bounded by the estimate)
            allowance = self.tokens.allowance(messages, specs)
            if isinstance(allowance, str):
                return self._finish(allowance, StopReason.TOKEN_BUDGET)
            try:
                completion = await ex.provider.complete(
                    model=ex.model.model, messages=messages, tools=specs, temperature=ex.model.temperature,
                    on_text=self.on_text, max_tokens=allowance,
                )
            except OrchestratorError as exc:  # ProviderError, or a provider that cannot be built
                return self._provider_failed(exc)
            finally:  # what the call held of the days: the charge below counts what it used instead
                self.tokens.release()
            calibrate(self.transcript, reported=_reported_input(completion), raw=request.raw)
            self._answered(completion)
            self.tokens.charge(completion, messages, self.answered_by)
        if completion.cut:
            return self._cut(completion, allowance)
        return completion

    def _cut(self, completion: Completion, allowance: int) -> TurnResult:
        # The answer stopped at its max_tokens: what it wrote is kept and said to be cut; a
        # tool call it was writing is incomplete and never runs.
        self.close_pending("the answer was cut short")
        if allowance < self.execution.model.max_output_tokens:
            note = f"[cut short: the token budget left this answer {allowance} tokens]"
            stop = StopReason.TOKEN_BUDGET
        else:
            note = f"[cut short at the model's output limit of {self.execution.model.max_output_tokens} tokens]"
            stop = StopReason.COMPLETED
        text = (completion.text or "").rstrip()
        return self._finish(f"{text}\n\n{note}" if text else note, stop)

    async def _request(self, prompt: str, specs: Sequence[Mapping[str, Any]]) -> Assembled:
        # L1: what is sent fits max_context_tokens by the estimate; `summarize` folds what left the window.
        # Images count at a flat cost here: their parts are added after the window is fitted.
        ex = self.execution
        policy, cap = ex.context, ex.knobs.max_history_messages
        images = image_tokens(ex.model, vision=ex.media.vision, detail=ex.media.image_detail)
        self.transcript.folding = policy.strategy == "summarize"
        request = assemble(policy, self.transcript, system_prompt=prompt, specs=specs, cap=cap, image_cost=images)
        if request.unfolded and policy.strategy == "summarize" and not self.folded:
            self.folded = True
            # folding takes at most summary_timeout_s, and at most half of what is left of the turn
            now = asyncio.get_running_loop().time()
            left = self.scope.deadline - now if self.scope is not None else policy.summary_timeout_s
            deadline = now + min(policy.summary_timeout_s, left / 2)
            if await fold(policy, self.transcript, window_start=request.start, deadline=deadline, account=self.tokens):
                request = assemble(
                    policy, self.transcript, system_prompt=prompt, specs=specs, cap=cap, image_cost=images
                )
        return request

    async def _emit(self, event: TurnEvent) -> None:
        if self.events is None:
            return
        try:
            await self.events(event)
        except Exception as exc:  # an observer must not end the turn
            logger.opt(exception=exc).warning("turn event observer failed for {}", self.execution.identity.agent)

    def _announced(self, call: ToolCall) -> Approver | None:
        """The turn's approver, telling the observers while a person is asked about `call`
        (so a surface shows "waiting for approval", not "running", until it may run)."""
        approver = self.approver
        if approver is None or self.events is None:
            return approver

        async def ask(request: ApprovalRequest) -> ApprovalDecision:
            await self._emit(ToolCallApproval(call_id=call.id, tool=call.name, waiting=True))
            try:
                return await approver(request)
            finally:
                await self._emit(ToolCallApproval(call_id=call.id, tool=call.name, waiting=False))

        return ask

    async def _stream_text(self, text: str) -> None:
        await self._emit(TextDelta(text=text))

    async def _turn_context(self) -> list[str]:
        # Read once per turn (pinned MCP resources); outside content is data, never instructions.
        ex = self.execution
        parts: list[str] = []
        for context in ex.turn_context:
            try:
                pieces = await context.read()
            except Exception as exc:  # a context source must not kill the turn
                logger.opt(exception=exc).error("turn context failed for {}", ex.identity.agent)
                continue
            cap = ex.knobs.max_tool_result_chars
            parts.extend(shape_for_model(text, cap=cap, untrusted=source) for source, text in pieces)
        return parts

    def _answered(self, completion: Completion) -> None:
        # A chain names the link that answered; a single provider leaves it to the binding.
        model = self.execution.model
        served = (completion.provider or model.provider, completion.model or model.model)
        self.answered_by = served
        if served != (model.provider, model.model):
            self.failed_over = True

    def result(self, text: str, stop: StopReason, *, error: str | None = None, incident: str | None = None) -> TurnResult:
        provider, model = self.answered_by or (None, None)
        # The reply leaves the daemon (a chat, the gateway, an editor, a caller): a model that
        # learned a secret some other way, or decoded one, does not get to repeat it there.
        return TurnResult(
            text=redact(text), stop=stop, executed=tuple(self.executed), error=error, incident=incident,
            provider=provider, model=model, failed_over=self.failed_over, tokens=self.tokens.used,
            usage=self.tokens.usage,
        )

    def _finish(self, text: str, stop: StopReason) -> TurnResult:
        self.transcript.append({"role": "assistant", "content": text})
        return self.result(text, stop)

    def _provider_failed(self, exc: OrchestratorError) -> TurnResult:
        # The detail (internal URL, status, a body that may echo the key) goes to the log
        # under the incident id; the chat gets only the id. The apology is not the model's
        # words: stored, it would be re-sent on every later turn as an assistant message.
        incident = secrets.token_hex(3)
        kind = "provider failure" if isinstance(exc, ProviderError) else "provider unusable"
        logger.warning("incident {}: {} for {}: {}", incident, kind, self.execution.identity.agent, exc)
        text = _PROVIDER_FAILED.format(incident=incident)
        return self.result(text, StopReason.PROVIDER_ERROR, error=str(exc), incident=incident)

    async def _execute(self, call: ToolCall) -> tuple[str, str | None]:
        # What the call gave, before any shaping, and the source to frame it as untrusted
        # data (None: not outside content); the loop redacts it first, then cuts and wraps.
        ex = self.execution
        tool = ex.tools.get(call.name)
        if tool is None:
            server = ex.tools.unavailable_server(call.name)
            if server is not None:  # granted by a bundle, but its server is connecting or down
                return (
                    f"Error: MCP server {server!r} is not available right now (starting up or down); "
                    f"{call.name!r} was not run. Try again later."
                ), None
            logger.warning("{} asked for tool {!r} outside its registry", ex.identity.agent, call.name)
            return f"Error: tool {call.name!r} is not available to this agent. It was not run.", None
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            return f"Error: the arguments for {call.name!r} are not valid JSON. It was not run.", None
        if not isinstance(arguments, dict):
            return f"Error: the arguments for {call.name!r} must be a JSON object. It was not run.", None
        spec = tool.spec
        if spec.contract is not None:  # a call that cannot run is never put to an operator
            try:
                spec.contract.parse(call.name, arguments)
            except InvalidArguments as exc:
                return f"Error: {exc.reason}", None
        decision = await ex.approvals.authorize(
            spec, arguments, session=self.transcript.session, approver=self._announced(call)
        )
        if decision.verdict is not Verdict.APPROVED:
            return decision.model_message(call.name), None
        # One budget per (agent, person): one busy sender cannot spend everyone else's.
        budget_key = f"{ex.identity.agent}:{self.actor or '-'}"
        if not ex.ledger.try_consume(budget_key, ex.knobs.max_actions_per_hour):
            return (
                f"Error: the action budget of {ex.knobs.max_actions_per_hour} tool calls per hour "
                f"is spent. {call.name!r} was not run."
            ), None
        self.executed.append(call.name)
        try:
            async with asyncio.timeout(ex.knobs.tool_timeout_s):
                output = await tool.invoke(arguments)
        except TimeoutError:
            return f"Error: {call.name!r} timed out after {ex.knobs.tool_timeout_s:g}s.", None
        except ToolFailure as exc:
            return f"Error: {exc.reason}", None
        except OrchestratorError as exc:
            return f"Error: {exc}", None
        except Exception as exc:  # a tool bug is the model's error message, never a dead turn
            logger.opt(exception=exc).error("tool {} crashed", call.name)
            return f"Error: {call.name!r} failed unexpectedly ({type(exc).__name__}).", None
        return output, call.name if spec.untrusted_output else None


def _reported_input(completion: Completion) -> int | None:
    """Return the prompt tokens the provider reported for this call (None: it reported none)."""
    return completion.usage.input_tokens if completion.usage is not None else None

