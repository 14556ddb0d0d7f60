"""TokenAccount: one turn's token budgets (L1 locks), checked before every model call, charged after it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from orchestrator.providers import Completion, Usage
from orchestrator.seam import CurrentTurn, ResolvedAgentExecution, budget_key

__all__ = ["TokenAccount", "TurnUsage", "estimate_tokens"]

_CHARS_PER_TOKEN: Final = 4  # a rough local estimate: no tokenizer is shipped or downloaded


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

    Before each model call, `over_budget` projects what the call will send: the previous
    call's reported input plus an estimate of the messages added since (the first call:
    an estimate of everything sent). A call whose projection would pass either budget is
    never made: the turn stops with the message `over_budget` returns. After each call,
    `charge` adds the reported usage (or, when the provider reported none, the estimate)
    to the turn, to the meter's day, and to the usage table, priced by the answering link;
    `usage` sums them by kind for the turn's log line.
    """

    __slots__ = (
        "_actor", "_execution", "_key", "_last_input", "_last_sent", "_session", "_specs_chars", "_turn", "usage", "used",
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
        self._key = budget_key(execution.identity.agent, actor)
        self.used = 0
        self.usage = TurnUsage()
        self._last_input: int | None = None  # the last call's input tokens, as reported or estimated
        self._last_sent = 0  # how many messages the last call sent
        self._specs_chars: int | None = None

    def over_budget(self, messages: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> str | None:
        """Return why the next call must not be made, or None when it fits both budgets."""
        knobs = self._execution.knobs
        projected = self._projected_input(messages, specs)
        if self.used + projected > knobs.max_tokens_per_turn:
            return (
                f"Stopped: the next model call would exceed this turn's token budget of "
                f"{knobs.max_tokens_per_turn} tokens ({self.used} used so far)."
            )
        today = self._execution.usage.spent_today(self._key)
        if today + projected > knobs.max_tokens_per_day:
            return (
                f"Stopped: the daily token budget of {knobs.max_tokens_per_day} tokens for "
                f"{self._execution.identity.agent!r} is spent ({today} used in the last 24 hours); try again later."
            )
        return None

    def charge(
        self, completion: Completion, messages: Sequence[Mapping[str, Any]], answered_by: tuple[str, str] | None
    ) -> None:
        """Count one answered call against the budgets and record it."""
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

    def _projected_input(self, messages: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> int:
        if self._last_input is not None and len(messages) >= self._last_sent:
            return self._last_input + estimate_tokens(_chars(messages[self._last_sent :]))
        if self._specs_chars is None:
            self._specs_chars = len(json.dumps(specs)) if specs else 0
        return estimate_tokens(_chars(messages) + self._specs_chars)


def _chars(messages: Sequence[Mapping[str, Any]]) -> int:
    # Content and tool-call arguments: what dominates the count, without encoding the whole chat.
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif content is not None:
            total += len(json.dumps(content))
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["arguments"]) + len(call["function"]["name"])
    return total


def _estimate_answer(completion: Completion) -> int:
    chars = len(completion.text or "") + sum(len(c.arguments) + len(c.name) for c in completion.tool_calls)
    return estimate_tokens(chars)
