"""Sessions: the one place a turn takes its session, loads its transcript, runs the engine and persists."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from loguru import logger

from orchestrator.engine import Transcript, TurnEvent, TurnEvents, TurnResult, compact_now, run_tool_call_loop
from orchestrator.errors import OrchestratorError
from orchestrator.policy import Approver
from orchestrator.seam import ResolvedAgentExecution
from orchestrator.sessions.transcripts import TranscriptSource
from orchestrator.store import FullDisk

__all__ = ["SessionState", "Sessions", "Turn", "TurnHook", "TurnRefused", "TurnStopped"]

_T = TypeVar("_T")


class TurnRefused(OrchestratorError):
    """The gate closed while the turn waited for its session (the daemon is stopping)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"session {key!r}: the turn was not started")


class TurnStopped(OrchestratorError):
    """The turn was stopped (`Sessions.stop`) before it produced a result."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"session {key!r}: the turn was stopped")


@dataclass(eq=False)
class SessionState:
    """One session key's place: its lock (FIFO), how many hold or wait for it, its running work."""

    key: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    current: asyncio.Future[Any] | None = None
    # what a message waiting for its turn does first (its attachments' intake): `stop` reaches it too
    preparing: set[asyncio.Future[Any]] = field(default_factory=set)


@dataclass(eq=False, kw_only=True)
class Turn:
    """One turn as its hooks see it; `result` is set once the engine stops (None: stopped)."""

    key: str
    agent: str
    transcript: Transcript
    execution: ResolvedAgentExecution | None = None  # what the engine runs (set before any hook sees the turn)
    result: TurnResult | None = None
    # The transcript write a full disk kept from the turn's end (past `Sessions`' patience): the
    # reply goes out first, then whoever sends it waits this out (`FullDisk.wait_out`).
    unsaved: Callable[[], None] | None = None
    _alongside: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    _watchers: list[TurnEvents] = field(default_factory=list)

    def alongside(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `work()` while the engine runs; it is cancelled as soon as the engine stops."""
        self._alongside.append(work)

    def watch(self, observer: TurnEvents) -> None:
        """Also send this turn's events (tool calls) to `observer`, after the caller's own."""
        self._watchers.append(observer)

    def completed(self) -> TurnResult:
        """Return the result; raises `TurnStopped` when the turn was stopped."""
        if self.result is None:
            raise TurnStopped(self.key)
        return self.result


TurnHook: TypeAlias = Callable[[Turn], AbstractAsyncContextManager[object]]
"""Watches one turn: entered once the session and transcript are ready, exited after the turn is persisted.

Code after the hook's `yield` sees `turn.result`; an exception (or cancellation) of the turn
is raised at the `yield`. A hook may `turn.alongside(...)` background work such as a typing
indicator. Hooks are entered in order and exited in reverse, all inside the session.
"""


class Sessions:
    """Runs turns one at a time per session key, in arrival order, over one transcript source.

    `hooks` watch every turn (usage accounting, for example); `run_turn(hooks=...)` adds
    per-turn ones (a channel's typing indicator and reply). With `disk` (the daemon's), a
    transcript write at a turn's end that meets a full disk is retried for up to
    `patience()` seconds; past that the turn ends with the write in `Turn.unsaved`.
    """

    def __init__(
        self,
        *,
        transcripts: TranscriptSource,
        hooks: Sequence[TurnHook] = (),
        disk: FullDisk | None = None,
        patience: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.transcripts = transcripts
        self._hooks = tuple(hooks)
        self._states: dict[str, SessionState] = {}
        self._disk = disk
        self._patience = patience

    def add_hook(self, hook: TurnHook) -> Callable[[], None]:
        """Watch every later turn with `hook` too (after the others); return a function removing it."""
        self._hooks = (*self._hooks, hook)

        def remove() -> None:
            self._hooks = tuple(h for h in self._hooks if h is not hook)

        return remove

    def queue_lengths(self) -> dict[str, int]:
        """Return, per live session, how many turns or tasks wait behind the one holding it."""
        return {key: state.users - (1 if state.lock.locked() else 0) for key, state in self._states.items()}

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def place(self, key: str) -> SessionState:
        """Take a place in session `key` (counted at once, so a burst queues in arrival order).

        Hand it to `run_turn` or `run_task` (which release it), or `release` it.
        """
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = SessionState(key=key)
        state.users += 1
        return state

    def release(self, state: SessionState) -> None:
        """Give a place back; the session's state goes once nobody holds or waits for it."""
        state.users -= 1
        if state.users == 0 and self._states.get(state.key) is state:
            del self._states[state.key]

    def busy(self, key: str) -> bool:
        """Return True while a turn or task holds session `key`."""
        state = self._states.get(key)
        return state is not None and state.lock.locked()

    def stop(self, key: str) -> bool:
        """Cancel what runs in session `key`; False when nothing does (the turn reports it stopped)."""
        state = self._states.get(key)
        if state is None:
            return False
        running = [work for work in (state.current, *state.preparing) if work is not None and not work.done()]
        for work in running:
            work.cancel()
        return bool(running)

    def stop_all(self) -> None:
        """Cancel what runs in every session."""
        for key in list(self._states):
            self.stop(key)

    async def run_turn(
        self,
        session: str | SessionState,
        *,
        agent: str,
        execution: ResolvedAgentExecution | Callable[[], ResolvedAgentExecution],
        text: str,
        approver: Approver | None,
        actor: str | None,
        events: TurnEvents | None = None,
        stream: bool = False,
        hooks: Sequence[TurnHook] = (),
        gate: Callable[[], bool] | None = None,
        media: Sequence[Mapping[str, Any]] = (),
    ) -> Turn:
        """Run one turn of `agent` in `session` (a key, or a place taken with `place`).

        Waits for the session, checks `gate` (False: `TurnRefused`, nothing ran), resolves
        `execution` when given as a callable, loads the transcript, enters the hooks, runs
        the engine and persists what the turn added, whatever happened, before the hooks
        exit (on a full disk: see the class, and `Turn.unsaved`). `Sessions.stop` ends the
        turn with `result` None; cancelling the caller cancels the turn, persists it, and
        propagates.
        """
        # The session is held inline (no context-manager object): this runs once per turn.
        state = self.place(session) if isinstance(session, str) else session
        try:
            async with state.lock:
                if gate is not None and not gate():
                    raise TurnRefused(state.key)
                return await self._run_held(
                    state, agent, execution, text, approver, actor, events, stream, hooks, media
                )
        finally:
            self.release(state)

    async def _run_held(
        self,
        state: SessionState,
        agent: str,
        execution: ResolvedAgentExecution | Callable[[], ResolvedAgentExecution],
        text: str,
        approver: Approver | None,
        actor: str | None,
        events: TurnEvents | None,
        stream: bool,
        hooks: Sequence[TurnHook],
        media: Sequence[Mapping[str, Any]] = (),
    ) -> Turn:
        if not isinstance(execution, ResolvedAgentExecution):
            execution = execution()
        keep = execution.context.hold_messages
        held = self.transcripts.open(state.key, agent, keep=keep)
        turn = Turn(key=state.key, agent=agent, transcript=held.transcript, execution=execution)
        watchers = (*self._hooks, *hooks) if self._hooks else tuple(hooks)

        async def engine() -> TurnResult:
            # Called inside every hook: what they `watch` hears this turn's events too.
            observer = _fan_out(events, turn._watchers) if turn._watchers else events
            return await run_tool_call_loop(
                execution, held.transcript, text, approver=approver, actor=actor, events=observer, stream=stream,
                media=media,
            )

        def save() -> None:
            self.transcripts.save(held, keep=keep)

        async def body() -> Turn:
            try:
                turn.result = await self._stoppable(state, engine, alongside=turn._alongside)
            except BaseException:
                # Ending anyway (a failure, the daemon stopping): one try, kept like the rest on a full disk.
                if self._disk is None:
                    save()
                elif not self._disk.attempt(save)[0]:
                    turn.unsaved = save
                raise
            if self._disk is None:
                save()
            elif not await self._disk.wait_out(save, for_s=self._patience()):
                turn.unsaved = save  # the disk is still full: the reply goes out first
            return turn

        return await _watched(watchers, 0, turn, body)

    async def run_child(
        self,
        transcript: Transcript,
        *,
        agent: str,
        execution: ResolvedAgentExecution,
        text: str,
        approver: Approver | None,
        actor: str | None,
        hooks: Sequence[TurnHook] = (),
    ) -> Turn:
        """Run one child turn (an SOP step) of `agent` on its own `transcript`, inside every hook.

        No session is taken and the transcript is neither loaded nor saved: the caller holds
        what the child runs under (`run_task` for a chat's `/sop`) and owns the transcript.
        The turn's key is the transcript's session. Cancellation propagates (the hooks see it).
        """
        turn = Turn(key=transcript.session, agent=agent, transcript=transcript, execution=execution)
        watchers = (*self._hooks, *hooks) if self._hooks else tuple(hooks)

        async def body() -> Turn:
            observer = _fan_out(None, turn._watchers) if turn._watchers else None
            beside = [asyncio.ensure_future(extra()) for extra in turn._alongside]
            try:
                turn.result = await run_tool_call_loop(
                    execution, transcript, text, approver=approver, actor=actor, events=observer
                )
            finally:
                for extra_task in beside:
                    extra_task.cancel()
            return turn

        return await _watched(watchers, 0, turn, body)

    async def compact(
        self,
        session: str,
        *,
        agent: str,
        execution: Callable[[], ResolvedAgentExecution],
        gate: Callable[[], bool] | None = None,
        actor: str | None = None,
    ) -> int | None:
        """Fold session `session`'s older messages into its summary now (`/compact`); return how many.

        Waits for a running turn like `run_turn` (the gate and `stop` behave the same; None:
        stopped). 0 means nothing was folded: too few messages, or summarizing failed (logged);
        the transcript is unchanged then. The summary calls count toward `actor`'s daily
        token budget with the agent, and are recorded for them.
        """
        state = self.place(session)
        try:
            async with state.lock:
                if gate is not None and not gate():
                    raise TurnRefused(state.key)
                resolved = execution()
                keep = resolved.context.hold_messages
                held = self.transcripts.open(state.key, agent, keep=keep)
                transcript = held.transcript
                before = transcript.summary.covers if transcript.summary else 0

                async def work() -> int:
                    if not await compact_now(resolved, transcript, actor=actor):
                        return 0
                    return (transcript.summary.covers if transcript.summary else 0) - before

                try:
                    return await self._stoppable(state, work, alongside=())
                finally:
                    # On a full disk the fold is kept in memory; the session's next save writes it.
                    if self._disk is None:
                        self.transcripts.save(held, keep=keep)
                    else:
                        self._disk.attempt(lambda: self.transcripts.save(held, keep=keep))
        finally:
            self.release(state)

    async def prepare(self, state: SessionState, work: Callable[[], Coroutine[Any, Any, _T]]) -> _T | None:
        """Run `work()` for a message holding a place in `state` before its turn; None when `stop` cancelled it.

        No lock is taken (it may run beside the session's current turn, as an intake does).
        The caller's own cancellation is passed on to `work` and propagates.
        """
        task = asyncio.ensure_future(work())
        state.preparing.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise
            return None
        finally:
            state.preparing.discard(task)

    async def run_task(
        self,
        session: str | SessionState,
        work: Callable[[], Coroutine[Any, Any, _T]],
        *,
        gate: Callable[[], bool] | None = None,
    ) -> _T | None:
        """Run `work()` holding `session` (an SOP run in a chat's session); None when stopped.

        The gate and cancellation behave as in `run_turn`; no transcript is loaded.
        """
        state = self.place(session) if isinstance(session, str) else session
        try:
            async with state.lock:
                if gate is not None and not gate():
                    raise TurnRefused(state.key)
                return await self._stoppable(state, work, alongside=())
        finally:
            self.release(state)

    @staticmethod
    async def _stoppable(
        state: SessionState,
        work: Callable[[], Coroutine[Any, Any, _T]],
        *,
        alongside: Sequence[Callable[[], Coroutine[Any, Any, None]]],
    ) -> _T | None:
        """Run `work()` as the session's current task; None when `stop` cancelled it.

        The caller's own cancellation is passed on to `work` (awaiting a task cancels it) and,
        once `work` has ended, propagates; a failure of `work` is raised as itself. `alongside`
        work runs in tasks of its own, cancelled as soon as `work` ends.
        """
        task = asyncio.ensure_future(work())
        state.current = task
        beside = [asyncio.ensure_future(extra()) for extra in alongside] if alongside else ()
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # the caller was cancelled (the daemon stopping), not this session's work
            return None
        finally:
            state.current = None
            for extra_task in beside:
                extra_task.cancel()


async def _watched(hooks: Sequence[TurnHook], index: int, turn: Turn, body: Callable[[], Awaitable[_T]]) -> _T:
    """Run `body()` inside `hooks[index:]`, entered in order and exited in reverse (no exit stack per turn)."""
    if index == len(hooks):
        return await body()
    async with hooks[index](turn):
        return await _watched(hooks, index + 1, turn, body)


def _fan_out(first: TurnEvents | None, others: Sequence[TurnEvents]) -> TurnEvents:
    """Return one observer calling the caller's own first, then each watcher's (each one's failure logged)."""
    observers = ((first,) if first is not None else ()) + tuple(others)
    if len(observers) == 1:
        return observers[0]

    async def every(event: TurnEvent) -> None:
        for observer in observers:
            try:
                await observer(event)
            except Exception as exc:  # one observer must not keep the event from the others
                logger.opt(exception=exc).warning("turn event observer failed")

    return every
