"""Runtime: the daemon object. Owns the config generation, services, store and every task."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from loguru import logger

from orchestrator.config import Config, resolve_secret
from orchestrator.config.secrets import SecretRef
from orchestrator.config.channels import ChannelConfig
from orchestrator.engine import Transcript
from orchestrator.policy import ApprovalDecision
from orchestrator.seam import ConstructionPath, Services, open_services
from orchestrator.store import SessionStore

if TYPE_CHECKING:
    from channels import ChannelAdapter
    from orchestrator.scheduler import ScheduleRunner

__all__ = ["ChannelHandle", "PendingApproval", "Runtime", "SessionState", "SessionTranscript"]

_TRANSCRIPT_CACHE: Final = 2048
_T = TypeVar("_T")


@dataclass(eq=False)
class SessionState:
    """One session key's turn lock, running turn and cached transcript."""

    key: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    current: asyncio.Future[Any] | None = None


@dataclass(eq=False)
class SessionTranscript:
    """The open session of a key: its id, transcript, and how much of it is persisted."""

    session_id: int
    transcript: Transcript
    persisted: int


@dataclass(eq=False)
class PendingApproval:
    """An approval prompt waiting in a chat; only `allowed` senders may answer it."""

    channel: str
    chat: str
    thread: str | None
    allowed: frozenset[str]
    future: asyncio.Future[ApprovalDecision]
    refusal: str  # what a sender who may not answer it is told


@dataclass(eq=False)
class ChannelHandle:
    """A running channel: its adapter, supervising task and readiness."""

    name: str
    kind: str
    settings: ChannelConfig
    adapter: ChannelAdapter
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    failed: BaseException | None = None


class Runtime:
    """Everything a running daemon holds; build it with `Runtime.open()`.

    The config generation can be swapped (`swap_config`); turns read `runtime.config` once
    when they start, so a turn never mixes two generations.
    """

    def __init__(
        self,
        *,
        config: Config,
        config_path: Path | None,
        services: Services,
        store: SessionStore,
        tasks: asyncio.TaskGroup,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.services = services
        self.store = store
        self._tasks = tasks
        self.channels: dict[str, ChannelHandle] = {}
        self.sessions: dict[str, SessionState] = {}
        self.approvals: dict[str, PendingApproval] = {}
        self.accepting = True
        self.inflight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        # Set once every MCP server of the first generation connected or failed its first attempt.
        self.mcp_settled = asyncio.Event()
        self._transcripts: OrderedDict[str, SessionTranscript] = OrderedDict()
        self._spawned: set[asyncio.Task[None]] = set()
        self.scheduler: ScheduleRunner | None = None  # set by `start_schedules`
        self._stack: AsyncExitStack | None = None

    @classmethod
    @asynccontextmanager
    async def open(
        cls, config: Config, *, config_path: Path | None = None, services: Services | None = None
    ) -> AsyncIterator[Runtime]:
        """Open the services (`open_services`, connecting the servers the agents reach) and the store.

        On exit every task is cancelled, then everything closes in reverse order.
        """
        state = config.state_path()
        async with AsyncExitStack() as stack:
            injected = services is not None
            if services is None:
                # Every agent, every SOP; reloadable: a reload may add agents that need more.
                services = await stack.enter_async_context(
                    open_services(
                        config, sorted(config.agents), ConstructionPath.CHANNEL, sops=sorted(config.sops),
                        reloadable=True, require_mcp=False, connect_now=False,
                    )
                )
            else:
                stack.push_async_callback(services.providers.aclose)
            store = stack.enter_context(SessionStore(state / "sessions.sqlite3"))
            tasks = await stack.enter_async_context(asyncio.TaskGroup())
            runtime = cls(config=config, config_path=config_path, services=services, store=store, tasks=tasks)
            stack.push_async_callback(runtime._cancel_everything)
            runtime._stack = stack
            if injected:
                await runtime.connect_mcp()
            else:  # channels start while the servers connect; their tools appear as each comes up
                runtime.spawn(runtime.connect_mcp(), name="mcp-connect")
            yield runtime

    async def connect_mcp(self) -> None:
        """Connect every MCP server the agents (and SOP steps) of this generation reach; log failures.

        A server that does not come up keeps retrying in the background; until it does, the
        agents using it simply have none of its tools (never another agent's).
        """
        pool = self.services.mcp
        if pool is None:
            self.mcp_settled.set()
            return
        from orchestrator.seam import ConstructionPath, connect_reach, service_reach

        config = self.config
        reach = service_reach(config, sorted(config.agents), ConstructionPath.CHANNEL, sops=sorted(config.sops))
        try:
            await connect_reach(pool, config, reach, require=False)
            self.warn_bundle_problems()
        finally:
            self.mcp_settled.set()

    def warn_bundle_problems(self) -> None:
        """Log each bundle tool name no connected server offers."""
        pool = self.services.mcp
        if pool is None:
            return
        from orchestrator.mcp import bundle_problems

        offers = {name: pool.offer(name, None) for name in self.config.mcp.servers}
        shown = str(self.config_path or "config")
        for problem in bundle_problems(self.config, offers, shown=shown):
            logger.warning("{}", problem)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[None]:
        """Run `coro` in the runtime's TaskGroup; its failure is logged, never fatal."""

        async def guarded() -> None:
            try:
                await coro
            except Exception as exc:  # one bad message or channel must not stop the daemon
                logger.opt(exception=exc).error("task {} failed", name or repr(coro))

        task = self._tasks.create_task(guarded(), name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        # Cancelled before its first step (the runtime closing), `coro` never ran: close it,
        # or Python warns that it was never awaited. Closing a finished coroutine does nothing.
        task.add_done_callback(lambda _: coro.close())
        return task

    async def enter_async_context(self, component: AbstractAsyncContextManager[_T]) -> _T:
        """Enter a component started after `open()`; it exits before every task is cancelled."""
        assert self._stack is not None, "the runtime is not open"
        return await self._stack.enter_async_context(component)

    def secret(self, ref: SecretRef) -> str:
        """Resolve a secret reference relative to the config file."""
        return resolve_secret(ref, base=self.config_path.parent if self.config_path else None)

    def session(self, key: str) -> SessionState:
        """Return the state for `key`, creating it (callers must release with `release`)."""
        state = self.sessions.get(key)
        if state is None:
            state = self.sessions[key] = SessionState(key=key)
        state.users += 1
        return state

    def release(self, state: SessionState) -> None:
        """Drop a session's state once nobody waits on it."""
        state.users -= 1
        if state.users == 0 and self.sessions.get(state.key) is state:
            del self.sessions[state.key]

    def transcript(self, key: str, agent: str, *, keep: int) -> SessionTranscript:
        """Return the open session of `key` for `agent`, loading its last `keep` messages once."""
        cached = self._transcripts.get(key)
        session_id = self.store.open_session(key, agent)
        if cached is not None and cached.session_id == session_id:
            self._transcripts.move_to_end(key)
            return cached
        messages, total = self.store.load_messages(session_id, last=keep)
        transcript = Transcript(session=str(session_id), messages=messages, dropped=total - len(messages))
        transcript.compact(keep)  # never start the window on an orphan tool result
        entry = SessionTranscript(session_id=session_id, transcript=transcript, persisted=total)
        self._transcripts[key] = entry
        if len(self._transcripts) > _TRANSCRIPT_CACHE:
            self._transcripts.popitem(last=False)
        return entry

    def persist(self, entry: SessionTranscript, *, keep: int) -> None:
        """Write the messages not yet stored, then hold only the last `keep` in memory."""
        transcript = entry.transcript
        fresh = transcript.messages[entry.persisted - transcript.dropped :]
        self.store.append_messages(entry.session_id, entry.persisted, fresh)
        entry.persisted = transcript.total
        transcript.compact(keep)

    def forget_session(self, key: str) -> None:
        """Close the open session of `key`; the next message starts afresh."""
        self.store.close_session(key)
        self._transcripts.pop(key, None)

    def turn_started(self) -> None:
        """Count a running turn (for draining)."""
        self.inflight += 1
        self.idle.clear()

    def turn_finished(self) -> None:
        """Uncount a running turn."""
        self.inflight -= 1
        if self.inflight == 0:
            self.idle.set()

    async def drain(self, grace_s: float) -> bool:
        """Wait up to `grace_s` for running turns; return True when none is left."""
        try:
            async with asyncio.timeout(grace_s):
                await self.idle.wait()
            return True
        except TimeoutError:
            return False

    def swap_config(self, config: Config) -> None:
        """Make `config` the generation new turns use."""
        self.config = config

    async def _cancel_everything(self) -> None:
        self.accepting = False
        for handle in self.channels.values():
            if handle.task is not None:
                handle.task.cancel()
        for task in list(self._spawned):
            task.cancel()
        for pending in self.approvals.values():
            pending.future.cancel()
        for handle in self.channels.values():
            try:
                await handle.adapter.aclose()
            except Exception as exc:
                logger.opt(exception=exc).warning("closing channel {} failed", handle.name)
