"""Runtime: the daemon's container: config generation, services, store, sessions, channels and tasks."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from loguru import logger

from orchestrator.config import Config, SecretRef, resolve_secret
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.channels import ChannelSet
from orchestrator.daemon.servers import connect_servers
from orchestrator.daemon.status import RecentErrors, build_status, config_digest
from orchestrator.daemon.whoami import WhoamiLimit
from orchestrator.observability import Observability, open_observability, require_telemetry
from orchestrator.seam import CODE_ALPHABET, CODE_LENGTH, CODE_TTL_S, ConstructionPath, Services, open_services
from orchestrator.sessions import Sessions, StoredTranscripts, Turn
from orchestrator.store import PairingAudit, FullDisk, GroupSync, PairingStore, RateWindows, SessionStore, state_fault

__all__ = ["Reloadable", "Runtime"]

_T = TypeVar("_T")


@runtime_checkable
class Reloadable(Protocol):
    """A component that follows config reloads (the scheduler)."""

    def sync(self, config: Config) -> None:
        """Apply a newly swapped-in config generation."""
        ...


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
        pairing: PairingStore,
        audit: PairingAudit,
        tasks: asyncio.TaskGroup,
        stack: AsyncExitStack,
    ) -> None:
        self.config = config
        self.config_path = config_path
        # The file's hash as read at start and at each reload (what `orchestrator status` shows).
        self.config_sha256 = config_digest(config_path)
        self.started_at = time.time()
        # The last errors and lifecycle changes logged, for the status document (`attach`ed at open).
        self.errors = RecentErrors()
        self.services = services
        self.store = store
        # Strangers' codes and the senders approvers paired (read on every message of a pairing route).
        self.pairing = pairing
        # Pairing decisions are audited beside approvals (its own connection to audit.sqlite3).
        self.audit = audit
        # `[[routes]] rate_limit`: each sender's messages per chat, in memory.
        self.rate_windows = RateWindows()
        self.transcripts = StoredTranscripts(store)
        # What the platform is told we have is on disk first (`deliver`, and a reply's text).
        self.inbox_sync = GroupSync(store.wal_sync)
        # A full state disk, said once per outage; intake, turns and usage rows wait it out.
        self.disk = FullDisk(str(config.state_path()))
        self.sessions = Sessions(
            transcripts=self.transcripts, disk=self.disk, patience=lambda: self.config.daemon.reply_deadline_s
        )
        self.channels = ChannelSet(spawn=lambda coro, name: self.spawn(coro, name=name))
        self.approvals = Approvals()
        # Set when a reply moves to the delivery queue (`park_reply`): wakes `serve_deliveries`.
        self.replies_waiting = asyncio.Event()
        # Sessions whose messages from before the restart are still to be answered (first).
        self.held = HeldSessions()
        self.whoami = WhoamiLimit()  # one /whoami answer per sender a minute
        # Replies the delivery queue gave up after `reply_give_up_s` (a metric).
        self.replies_given_up = 0
        # Set once every MCP server of the first generation connected or failed its first attempt.
        self.mcp_settled = asyncio.Event()
        # The metrics and traces attached at open (`[gateway] metrics`, `[telemetry]`).
        self.observability = Observability()
        self._tasks = tasks
        self._stack = stack
        self._accepting = True
        # Set once the state files failed in a way no retry fixes: the daemon stops (exit 1).
        self.failed = asyncio.Event()
        self.failure: str | None = None
        services.usage.report_faults(self.fail, disk=self.disk)
        self._inflight = 0
        self._idle = asyncio.Event()
        self._counter = _InFlight(self)
        self._idle.set()
        self._spawned: set[asyncio.Task[None]] = set()
        self._components: list[object] = []

    @classmethod
    @asynccontextmanager
    async def open(
        cls, config: Config, *, config_path: Path | None = None, services: Services | None = None
    ) -> AsyncIterator[Runtime]:
        """Open the services (`open_services`, connecting the servers the agents reach) and the store.

        Raises `TelemetryUnavailable` before opening anything when `[telemetry]` needs packages
        that are not installed. On exit every task is cancelled, then everything closes in
        reverse order.
        """
        require_telemetry(config.telemetry)
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
            pairing = stack.enter_context(
                PairingStore(state / "pairing.sqlite3", alphabet=CODE_ALPHABET, length=CODE_LENGTH, ttl_s=CODE_TTL_S)
            )
            audit = stack.enter_context(PairingAudit(state / "audit.sqlite3"))
            # Metrics and traces outlive every task (a cancelled turn still ends its span).
            observed = await stack.enter_async_context(AsyncExitStack())
            tasks = await stack.enter_async_context(asyncio.TaskGroup())
            runtime = cls(
                config=config, config_path=config_path, services=services, store=store, pairing=pairing,
                audit=audit, tasks=tasks, stack=stack,
            )
            stack.callback(_detach, runtime.errors.attach())
            # Before any turn resolves (it binds the audit sink).
            runtime.observability = await observed.enter_async_context(open_observability(runtime, config))
            stack.push_async_callback(runtime._cancel_everything)
            if injected:
                await runtime.connect_mcp()
            else:  # channels start while the servers connect; their tools appear as each comes up
                runtime.spawn(runtime.connect_mcp(), name="mcp-connect")
            yield runtime

    @property
    def accepting(self) -> bool:
        """Return False once the daemon stops taking new turns (`stop_accepting`)."""
        return self._accepting

    @property
    def inflight(self) -> int:
        """Return how many turns are running (a channel turn until its reply is sent)."""
        return self._inflight

    @property
    def idle(self) -> asyncio.Event:
        """Return the event set while no turn runs."""
        return self._idle

    def stop_accepting(self) -> None:
        """Stop intake: messages are still stored (pending for the next start), no new turn starts."""
        self._accepting = False

    async def connect_mcp(self) -> None:
        """Connect the MCP servers this config generation reaches (see `connect_servers`)."""
        shown = str(self.config_path or "config")
        await connect_servers(self.config, self.services, shown=shown, settled=self.mcp_settled)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[None]:
        """Run `coro` in the runtime's TaskGroup; its failure is logged, never fatal."""

        async def guarded() -> None:
            try:
                await coro
            except Exception as exc:  # one bad message or channel must not stop the daemon
                reason = state_fault(exc)
                if reason is not None:  # ...but state files that cannot be used any more do
                    self.fail(reason)
                else:
                    logger.opt(exception=exc).error("task {} failed", name or repr(coro))

        runner = guarded()
        try:
            task = self._tasks.create_task(runner, name=name)
        except RuntimeError:  # the group is shutting down (a stop during start-up): neither ran
            runner.close()
            coro.close()
            raise
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        # Cancelled before its first step (the runtime closing), `coro` never ran: close it,
        # or Python warns that it was never awaited. Closing a finished coroutine does nothing.
        task.add_done_callback(lambda _: coro.close())
        return task

    def fail(self, reason: str) -> None:
        """The state files are unusable (corrupt, an I/O error, read-only): log it once, stop the daemon.

        Nothing more is acknowledged that could not be stored; what was stored is answered
        after the next start (which checks the files first and names a damaged one).
        """
        if self.failure is None:
            self.failure = reason
            logger.error(
                "the state files under {} failed: {}; stopping (exit 1). The next start checks them "
                "and names a damaged file", self.config.daemon.state_dir, reason,
            )
        self.failed.set()

    def task_count(self) -> int:
        """Return how many spawned tasks are alive (channel supervisors included)."""
        return len(self._spawned)

    async def enter_async_context(self, component: AbstractAsyncContextManager[_T]) -> _T:
        """Enter a component started after `open()`; it exits before every task is cancelled.

        A component that is `Reloadable` follows `swap_config` from then on.
        """
        entered = await self._stack.enter_async_context(component)
        self._components.append(entered)
        self._stack.callback(self._components.remove, entered)
        return entered

    def component(self, kind: type[_T]) -> _T | None:
        """Return the entered component of type `kind`, if any."""
        return next((c for c in self._components if isinstance(c, kind)), None)

    def secret(self, ref: SecretRef) -> str:
        """Resolve a secret reference relative to the config file."""
        return resolve_secret(ref, base=self.config_path.parent if self.config_path else None)

    def in_flight(self) -> AbstractAsyncContextManager[None]:
        """Count a running turn (for draining) while the context is open."""
        return self._counter

    def _enter_flight(self) -> None:
        self._inflight += 1
        self._idle.clear()

    def _leave_flight(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    def counting(self, _turn: Turn) -> AbstractAsyncContextManager[None]:
        """Return a turn hook counting the turn in flight (`Sessions.run_turn(hooks=...)`)."""
        return self.in_flight()

    async def drain(self, grace_s: float) -> bool:
        """Wait up to `grace_s` for running turns; return True when none is left."""
        try:
            async with asyncio.timeout(grace_s):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    def status_document(self) -> dict[str, Any]:
        """Return the status document (docs/status.md) as it is now."""
        return build_status(self)

    def swap_config(self, config: Config) -> None:
        """Make `config` the generation new turns use; reloadable components follow it."""
        self.config = config
        self.config_sha256 = config_digest(self.config_path)
        for component in self._components:
            if isinstance(component, Reloadable):
                component.sync(config)

    async def _cancel_everything(self) -> None:
        self._accepting = False
        self.channels.cancel_all()
        for task in list(self._spawned):
            task.cancel()
        self.approvals.cancel_all()
        await self.channels.close_all()


def _detach(sink: int) -> None:
    with contextlib.suppress(ValueError):  # `configure_logging` since removed every sink
        logger.remove(sink)


class HeldSessions:
    """Sessions with messages a previous process accepted and this one has not answered yet.

    `hold_replayed` counts them in before channels start; a new message of such a session
    waits (`cleared`) until they are answered, so a session's held and new messages are
    answered in arrival order across the restart.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, asyncio.Event]] = {}

    def hold(self, key: str) -> None:
        """Count one more held message of session `key`."""
        count, cleared = self._held.get(key, (0, asyncio.Event()))
        self._held[key] = (count + 1, cleared)

    def release(self, key: str) -> None:
        """One held message of `key` was answered (or dropped); the last one clears the session."""
        count, cleared = self._held[key]
        if count > 1:
            self._held[key] = (count - 1, cleared)
            return
        del self._held[key]
        cleared.set()

    async def cleared(self, key: str) -> None:
        """Return once session `key` holds no message from before (at once when it never did)."""
        held = self._held.get(key)
        if held is not None:
            await held[1].wait()


class _InFlight:
    """The runtime's one in-flight counter as an async context (reentrant: it holds no per-use state).

    A plain object rather than an `@asynccontextmanager` generator: it is entered on every turn.
    """

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def __aenter__(self) -> None:
        self._runtime._enter_flight()

    async def __aexit__(self, *_: object) -> None:
        self._runtime._leave_flight()
