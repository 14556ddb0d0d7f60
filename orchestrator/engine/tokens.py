"""TokenAccount: one turn's token budgets (L1 locks), checked before every model call, charged after it.

Each call asks for at most what is left of the tightest budget that applies (the turn's,
and the day of this agent and sender and of every caller up a delegation chain) after
what it sends, so a call passes a budget by no more than the error of the estimate of its
input; a call that would have less than `MIN_ANSWER_TOKENS` to answer in is not made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from orchestrator.providers import Completion, Usage
from orchestrator.seam import CurrentTurn, DayBudget, ResolvedAgentExecution, day_budgets

__all__ = ["MIN_ANSWER_TOKENS", "TokenAccount", "TurnUsage", "estimate_tokens"]

# Below this many output tokens an answer is cut before it says anything useful: such a call is not made.
MIN_ANSWER_TOKENS: Final = 64

_CHARS_PER_TOKEN: Final = 4  # a rough local estimate: no tokenizer is shipped or downloaded
_IMAGE_TOKENS: Final = 1_600  # one image part, as `context.IMAGE_TOKENS`


def estimate_tokens(chars: int) -> int:
    """Return the local estimate of the tokens in `chars` characters (at least 1)."""
    return max(1, chars // _CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnUsage:
    """What one turn's model calls used, by kind (delegated turns' included), and what it cost.

    `cached_tokens` (cache reads) and `cache_write_tokens` are parts of `input_tokens`;
    `cost` is None when no call of the turn was priced.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    def plus(self, other: TurnUsage) -> TurnUsage:
        """Return the sum of both."""
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return TurnUsage(
            input_tokens=self.input_tokens + other.input_tokens, output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens, cost=cost,
        )


class TokenAccount:
    """Keep one turn inside `max_tokens_per_turn` and its (agent, sender) inside `max_tokens_per_day`.

    Before each model call, `allowance` projects what the call will send: the previous
    call's reported input plus an estimate of the messages added since (the first call:
    an estimate of everything sent), and returns the output tokens the call may ask for:
    what is left of the tightest budget after that (the turn's; the days of this agent
    and of every caller up the delegation chain, with the same sender). A call that would
    have fewer than `MIN_ANSWER_TOKENS` is never made: the turn stops with the line
    `allowance` returns, which says what was used and what the call would need. After each call,
    `charge` adds the reported usage (or, when the provider reported none, the estimate)
    to the turn, to the meter's day, and to the usage table, priced by the answering link;
    `usage` sums them by kind for the turn's log line.
    """

    __slots__ = (
        "_actor", "_days", "_execution", "_held", "_last_input", "_last_sent", "_session", "_specs_chars", "_turn",
        "usage", "used",
    )

    def __init__(
        self,
        execution: ResolvedAgentExecution,
        *,
        actor: str | None,
        session: str,
        turn: Callable[[], CurrentTurn | None],
    ) -> None:
        self._execution = execution
        self._actor = actor
        self._session = session
        self._turn = turn
        self._days: tuple[DayBudget, ...] | None = None  # known once the turn's scope (and its caller) is set
        self._held: Callable[[], None] | None = None  # releases what the call in flight holds of the days
        self.used = 0
        self.usage = TurnUsage()
        self._last_input: int | None = None  # the last call's input tokens, as reported or estimated
        self._last_sent = 0  # how many messages the last call sent
        self._specs_chars: int | None = None

    def allowance(self, messages: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> int | str:
        """Return the most output tokens the next call may ask for, or the line saying why it must not be made."""
        limit = self._execution.knobs.max_tokens_per_turn
        projected = self._projected_input(messages, specs)
        need = projected + MIN_ANSWER_TOKENS
        wants = (
            f"the next model call would need about {need} tokens "
            f"({projected} to send, at least {MIN_ANSWER_TOKENS} for the answer)"
        )
        left = limit - self.used
        if left < need:
            return (
                f"Stopped: {wants}, and this turn's token budget of {limit} tokens has "
                f"{max(0, left)} left ({self.used} used so far)."
            )
        room = left - projected
        days = self.days()
        for day in days:
            spent = self._execution.usage.spent_today(day.key)
            left = day.limit - spent
            if left < need:
                return _day_line(day, spent, wants)
            room = min(room, left - projected)
        # what the call may use is held against the days until it is charged (`release`)
        self.release()
        self._held = self._execution.usage.hold(tuple(day.key for day in days), projected + room)
        return room

    def release(self) -> None:
        """Give back what the last allowed call held of the days (it was charged, failed or was cancelled)."""
        release, self._held = self._held, None
        if release is not None:
            release()

    def days(self) -> tuple[DayBudget, ...]:
        """Return the daily budgets this turn's calls count against: its own, then each caller's."""
        if self._days is None:
            scope = self._turn()
            self._days = day_budgets(self._execution, self._actor, scope.caller if scope is not None else None)
        return self._days

    def summary_allowance(self, projected: int) -> int | None:
        """Return the most output a summary call sending about `projected` tokens may ask for, or None: defer it.

        Summary calls count toward the (agent, sender) day (and its callers'), never toward
        the turn: the user did not ask for them, and one must not stop the turn that
        triggered it. None when a day would have fewer than `MIN_ANSWER_TOKENS` left for the summary.
        """
        meter = self._execution.usage
        room = min(day.limit - meter.spent_today(day.key) - projected for day in self.days())
        return room if room >= MIN_ANSWER_TOKENS else None

    def charge_summary(self, completion: Completion, messages: Sequence[Mapping[str, Any]]) -> None:
        """Count one answered summary call against the day and record it (`purpose = "summary"`)."""
        ex = self._execution
        link = ex.context.summary_model
        usage, estimated = completion.usage, False
        if usage is None:
            usage, estimated = Usage(
                input_tokens=estimate_tokens(_chars(messages)), output_tokens=_estimate_answer(completion)
            ), True
        ex.usage.record(
            binding=link, provider=completion.provider or link.provider, model=completion.model or link.model,
            usage=usage, estimated=estimated, agent=ex.identity.agent, path=ex.identity.path.value,
            sender=self._actor, session=self._session, purpose="summary", callers=self._callers(),
        )

    def charge(
        self, completion: Completion, messages: Sequence[Mapping[str, Any]], answered_by: tuple[str, str] | None
    ) -> None:
        """Count one answered call against the budgets and record it (what it held is released first)."""
        self.release()
        ex = self._execution
        usage, estimated = completion.usage, False
        if usage is None:  # the provider reported nothing: count the estimate, and say so in the row
            usage, estimated = Usage(
                input_tokens=self._projected_input(messages, ()), output_tokens=_estimate_answer(completion)
            ), True
        self._last_input, self._last_sent = usage.input_tokens, len(messages)
        provider, model = answered_by or (ex.model.provider, ex.model.model)
        row = ex.usage.record(
            binding=ex.model, provider=provider, model=model, usage=usage, estimated=estimated,
            agent=ex.identity.agent, path=ex.identity.path.value, sender=self._actor, session=self._session,
            callers=self._callers(),
        )
        self.add(usage.total, TurnUsage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens, cost=row.cost,
        ))

    def add(self, tokens: int, usage: TurnUsage | None = None) -> None:
        """Add `tokens` (and their kinds, `usage`) to this turn (a delegated child's are added when it returns)."""
        self.used += tokens
        if usage is not None:
            self.usage = self.usage.plus(usage)
        scope = self._turn()
        if scope is not None:
            scope.tokens = self.used

    def _callers(self) -> tuple[str, ...]:
        return tuple(day.agent for day in self.days()[1:])

    def _projected_input(self, messages: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> int:
        if self._last_input is not None and len(messages) >= self._last_sent:
            return self._last_input + estimate_tokens(_chars(messages[self._last_sent :]))
        if self._specs_chars is None:
            self._specs_chars = len(json.dumps(specs)) if specs else 0
        return estimate_tokens(_chars(messages) + self._specs_chars)


def _day_line(day: DayBudget, spent: int, wants: str) -> str:
    # "is spent" only when it is: otherwise what is left, and what the call would have needed
    if spent >= day.limit:
        return (
            f"Stopped: the daily token budget of {day.limit} tokens for {day.agent!r} is spent "
            f"({spent} used in the last 24 hours); try again later."
        )
    return (
        f"Stopped: {wants}, and the daily token budget of {day.limit} tokens for {day.agent!r} has "
        f"{day.limit - spent} left ({spent} used in the last 24 hours); try again later."
    )


def _chars(messages: Sequence[Mapping[str, Any]]) -> int:
    # Content and tool-call arguments: what dominates the count, without encoding the whole chat.
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(_part_chars(part) for part in content)
        elif content is not None:
            total += len(json.dumps(content))
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["arguments"]) + len(call["function"]["name"])
    return total


def _part_chars(part: Any) -> int:
    # An image part is billed by its pixels, not its base64 length: count the flat
    # `IMAGE_TOKENS` (as characters), never the data URL, which would be megabytes.
    if isinstance(part, Mapping):
        if part.get("type") == "text":
            return len(str(part.get("text", "")))
        if part.get("type") in ("image_url", "image", "input_image"):
            return _IMAGE_TOKENS * _CHARS_PER_TOKEN
    return len(json.dumps(part, default=str))


def _estimate_answer(completion: Completion) -> int:
    chars = len(completion.text or "") + sum(len(c.arguments) + len(c.name) for c in completion.tool_calls)
    return estimate_tokens(chars)
