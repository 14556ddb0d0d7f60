"""UsageMeter: the runtime state behind the token budgets, and where every call's usage is recorded."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from loguru import logger

from orchestrator.store import NOBODY, FullDisk, Grouping, Purpose, UsageReport, UsageRow

if TYPE_CHECKING:
    from orchestrator.providers import ModelBinding, Usage
    from orchestrator.seam.execution import ResolvedAgentExecution
    from orchestrator.seam.turn_scope import CurrentTurn
    from orchestrator.store import UsageLog

__all__ = ["DAY_S", "DayBudget", "UsageMeter", "UsageWatcher", "budget_key", "day_budgets"]

DAY_S: Final = 24 * 3600.0
BUCKET_S: Final = 60.0  # a key's calls within one minute share one entry: a day holds at most 1,440
_SWEEP_S: Final = 60.0  # how often keys with nothing left in the day are dropped

UsageWatcher: TypeAlias = Callable[[UsageRow], None]
"""Hears each recorded model call's row (tokens by kind, cost), as it is recorded."""


def budget_key(agent: str, sender: str | None) -> str:
    """Return the key a token budget is kept under: one per (agent, person), like the action budget."""
    return f"{agent}:{sender or NOBODY}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DayBudget:
    """One (agent, sender)'s daily token budget that a turn's model calls count against."""

    agent: str
    key: str
    limit: int


def day_budgets(
    execution: ResolvedAgentExecution, actor: str | None, caller: CurrentTurn | None
) -> tuple[DayBudget, ...]:
    """Return the daily budgets a turn's calls count against: its own, then each caller's up the chain.

    One ledger per (agent, sender): a delegated turn (a->b->c) spends b's and c's tokens
    out of a's day as well as their own, so a cheap front agent cannot spend without limit
    through an expensive delegate, and a spent caller's day stops its delegates' calls.
    """
    own = DayBudget(
        agent=execution.identity.agent, key=budget_key(execution.identity.agent, actor),
        limit=execution.knobs.max_tokens_per_day,
    )
    budgets = [own]
    turn = caller
    while turn is not None:
        agent = turn.execution.identity.agent
        key = budget_key(agent, turn.actor)
        if all(day.key != key for day in budgets):  # a->b->a: a's day is charged once
            budgets.append(DayBudget(agent=agent, key=key, limit=turn.execution.knobs.max_tokens_per_day))
        turn = turn.caller
    return tuple(budgets)


class UsageMeter:
    """Count model tokens per (agent, sender) over a sliding day, and record every call.

    One per daemon (in `Services`). With a `log`, each call is appended to the usage table
    and the day's spend is read back from it when the meter opens, so a restart does not
    hand every sender a fresh day; without one (tests, throwaway services), it only counts.
    `clock` is the wall clock (rows are stamped with it; tests pass their own).
    """

    __slots__ = ("_clock", "_held", "_log", "_spent", "_swept", "_watchers")

    def __init__(self, *, log: UsageLog | None = None, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._log = log
        self._spent: dict[str, _Window] = {}
        self._held: dict[str, int] = {}  # tokens calls in flight may still use, per key
        self._watchers: tuple[UsageWatcher, ...] = ()
        self._swept = clock()
        if log is not None:
            for agent, sender, ts, tokens, callers in log.spent_since(clock() - DAY_S):
                self._window(budget_key(agent, sender)).add(ts, tokens)
                for caller in _callers(callers):
                    self._window(budget_key(caller, sender)).add(ts, tokens)

    def report_faults(self, callback: Callable[[str], None], *, disk: FullDisk | None = None) -> None:
        """Hand a state fault of the usage table's writes to `callback` (the daemon stops on one).

        `disk` is the daemon's record of a full disk, so an outage is said once for every store.
        """
        if self._log is not None:
            self._log.on_fault = callback
            if disk is not None:
                self._log.disk = disk

    def report(
        self, *, by: Grouping = "agent", since: float | None = None, agent: str | None = None, sender: str | None = None
    ) -> UsageReport:
        """Return the recorded usage per `by` group (empty without a log)."""
        rows = self._log.totals(by=by, since=since, agent=agent, sender=sender) if self._log is not None else []
        return UsageReport(by=by, since=since, agent=agent, sender=sender, rows=tuple(rows))

    def day_entries(self) -> dict[str, int]:
        """Return how many entries each key's day holds (at most one per minute with a call; a key
        with none in the last day is dropped within a minute of the next recorded call)."""
        return {key: window.entries for key, window in self._spent.items()}

    def spent_today(self, key: str) -> int:
        """Return the tokens `key` used over the last 24 hours, and what its calls in flight may still use."""
        window = self._spent.get(key)
        spent = window.total_since(self._clock() - DAY_S) if window is not None else 0
        return spent + self._held.get(key, 0)

    def hold(self, keys: tuple[str, ...], tokens: int) -> Callable[[], None]:
        """Count `tokens` against each key's day until the returned function is called (once the call is charged).

        A call in flight holds what it may use (its projected input and its `max_tokens`),
        so two calls of one (agent, sender) at once (several gateway callers share one key)
        cannot each be allowed what is left of the same day.
        """
        for key in keys:
            self._held[key] = self._held.get(key, 0) + tokens
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            for key in keys:
                left = self._held.get(key, 0) - tokens
                if left > 0:
                    self._held[key] = left
                else:
                    self._held.pop(key, None)

        return release

    def _sweep(self, now: float) -> None:
        self._swept = now
        horizon = now - DAY_S
        for key in [k for k, window in self._spent.items() if window.empty_since(horizon)]:
            del self._spent[key]

    def _window(self, key: str) -> _Window:
        window = self._spent.get(key)
        if window is None:
            window = self._spent[key] = _Window()
        return window

    def watch(self, watcher: UsageWatcher) -> Callable[[], None]:
        """Also hand every recorded call's row to `watcher` (the metrics); return a function removing it.

        The watcher runs on the call's path: it must only add to counters.
        """
        self._watchers = (*self._watchers, watcher)

        def remove() -> None:
            self._watchers = tuple(w for w in self._watchers if w is not watcher)

        return remove

    def flush(self) -> None:
        """Write the queued rows now (a turn ends: its usage is durable before its transcript and reply)."""
        if self._log is not None:
            self._log.flush()

    def record(
        self,
        *,
        binding: ModelBinding,
        provider: str,
        model: str,
        usage: Usage,
        estimated: bool,
        agent: str,
        path: str,
        sender: str | None,
        session: str,
        purpose: Purpose = "turn",
        callers: tuple[str, ...] = (),
    ) -> UsageRow:
        """Count `usage` against (agent, sender), append it to the log priced by the answering link; return the row.

        `purpose` tells a turn's own calls from the summary calls its context made;
        `callers` are the agents up the delegation chain (nearest first), whose days with
        the same sender the call counts against as well (kept in the row, so a restart
        reads the same days back).
        """
        now = self._clock()
        if now - self._swept >= _SWEEP_S:
            self._sweep(now)
        self._window(budget_key(agent, sender)).add(now, usage.total)
        for caller in callers:
            self._window(budget_key(caller, sender)).add(now, usage.total)
        prices = next((link.prices for link in binding.chain if link.provider == provider), None)
        row = UsageRow(
            ts=now, agent=agent, path=path, sender=sender or NOBODY, session=session,
            provider=provider, model=model, input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            estimated=estimated, cost=prices.cost(usage) if prices is not None else None, purpose=purpose,
            callers=json.dumps(list(callers)) if callers else "",
        )
        if self._log is not None:
            self._log.record(row)
        for watcher in self._watchers:
            try:
                watcher(row)
            except Exception as exc:  # a counter must never cost a turn its answer
                logger.opt(exception=exc).warning("usage watcher failed")
        return row


def _callers(column: str) -> tuple[str, ...]:
    # A row's `callers`: the agents up the delegation chain as a JSON list ("" for none).
    if not column:
        return ()
    try:
        names = json.loads(column)
    except ValueError:
        return ()
    return tuple(name for name in names if isinstance(name, str)) if isinstance(names, list) else ()


class _Window:
    """One key's calls over the sliding day, with their running sum (a check costs no re-count).

    Calls within one `BUCKET_S` minute share an entry stamped with the latest of them, so a
    day of calls every second keeps 1,440 entries, not 86,400; a minute's tokens leave the
    window with its last call (up to a minute late: the budget errs on the strict side).
    """

    __slots__ = ("_events", "_total")

    def __init__(self) -> None:
        self._events: deque[tuple[float, int]] = deque()
        self._total = 0

    @property
    def entries(self) -> int:
        return len(self._events)

    def add(self, ts: float, tokens: int) -> None:
        events = self._events
        if events and events[-1][0] <= ts and events[-1][0] // BUCKET_S == ts // BUCKET_S:
            events[-1] = (ts, events[-1][1] + tokens)
        else:
            events.append((ts, tokens))
        self._total += tokens

    def empty_since(self, horizon: float) -> bool:
        """Drop what is older than `horizon`; return True when nothing is left."""
        self.total_since(horizon)
        return not self._events

    def total_since(self, horizon: float) -> int:
        events = self._events
        while events and events[0][0] < horizon:
            self._total -= events.popleft()[1]
        return self._total
