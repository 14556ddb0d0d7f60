"""McpConnection: one MCP client session, owned by one long-lived task, restarted after faults.

The owner task (`run`) enters the SDK client, keeps it while it is healthy and reconnects
with capped exponential backoff plus jitter when the server crashes, the stream ends or a
probe fails. Calls come from any task; each is bounded by the server's `tool_timeout_s`
and every fault becomes a `ToolFailure` for that call, never an exception the engine
has to know about.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from loguru import logger

from orchestrator.config import McpServerConfig
from orchestrator.errors import SecretError, ToolFailure
from orchestrator.lifecycle import Lifecycle, LifecycleRecord
from orchestrator.mcp.launch import open_transport
from orchestrator.mcp.offer import ServerOffer
from orchestrator.mcp.naming import unusable_reason

if TYPE_CHECKING:
    import mcp.types
    from mcp import Client
    from mcp.client import IncomingMessage

__all__ = ["Backoff", "ConnectionState", "McpConnection", "lifecycle_of"]

_T = TypeVar("_T")
_MAX_PAGES: Final = 100  # a server whose listing never ends cannot hang a refresh
# The longest reconnect backoff while a call waits for the server (`ready_wait_s`): a
# server that comes back is found within this, not after the backoff grown while it was down.
_HURRIED_BACKOFF_S: Final = 0.25
_CLIENT_NAME: Final = "orchestrator"


class ConnectionState(enum.Enum):
    """Where a connection is in its life."""

    CONNECTING = "connecting"
    READY = "ready"
    BACKOFF = "backoff"  # the last attempt failed; another is scheduled
    FAILED = "failed"  # a fault retrying cannot fix (missing command or secret, auth refused)
    CLOSED = "closed"


def lifecycle_of(state: ConnectionState, *, ever_ready: bool) -> Lifecycle:
    """Return the lifecycle value of a connection in `state`: before its first ready it is connecting."""
    if state is ConnectionState.READY:
        return Lifecycle.READY
    if state in (ConnectionState.FAILED, ConnectionState.CLOSED):
        return Lifecycle.STOPPED
    return Lifecycle.RECONNECTING if ever_ready else Lifecycle.CONNECTING


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Capped exponential backoff with jitter between reconnect attempts."""

    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, failures: int) -> float:
        """Return how long to wait after `failures` consecutive failed attempts."""
        return min(self.cap_s, self.base_s * 2.0 ** min(failures, 30)) * random.uniform(0.5, 1.0)


class McpConnection:
    """One server session (per server, or per (server, agent) for `isolation = "per_agent"`)."""

    def __init__(
        self,
        *,
        server: str,
        config: McpServerConfig,
        base: Path | None,
        connect_timeout_s: float,
        backoff: Backoff,
        on_offer: Callable[[], None],
    ) -> None:
        self.server = server
        self.offer: ServerOffer | None = None
        self.state = ConnectionState.CONNECTING
        self.last_error: str | None = None
        self.failed_attempts = 0  # connect attempts that failed, ever (waiting callers watch it)
        # The one state value `/health`, the metrics and `orchestrator status` read (from `state`).
        self.lifecycle = LifecycleRecord()
        self._ever_ready = False
        self._config = config
        self._base = base
        self._connect_timeout_s = connect_timeout_s
        self._backoff = backoff
        self._on_offer = on_offer
        self._client: Client | None = None
        self._retry_at = 0.0
        self._backoff_from = 0.0  # when the current backoff began
        self._waiting = 0  # calls waiting for the server (`ready_wait_s`): the backoff is cut short
        self._hurry = asyncio.Event()  # a call began waiting, or `close()`: a backoff under way is re-timed
        self._closing = False
        self._state_changed = asyncio.Event()
        self._wake = asyncio.Event()  # leave the current session: stream lost, restart, close
        self._refresh = asyncio.Event()  # list again: list-changed notification or liveness probe
        self._end_reason: str | None = None
        self._unreadable = 0  # lines of this connection's output that were not MCP
        self._session_lost = _Flag()  # set when the server says it forgot this session

    def close(self) -> None:
        """Ask the owner task to shut the session down and stop."""
        self._closing = True
        self._wake.set()
        self._hurry.set()

    @property
    def connecting(self) -> bool:
        """Return True while an attempt to connect is under way."""
        return self.state is ConnectionState.CONNECTING

    async def settled(self) -> None:
        """Wait until the connection is ready or an attempt to connect has failed."""
        while self.state is ConnectionState.CONNECTING:
            await self._state_changed.wait()

    async def first_connect(self) -> None:
        """Wait up to the server's `ready_wait_s` while its first attempt to connect is under way.

        Returns at once for a server that was ready once, or whose first attempt failed
        (`settled` is what start-up waits for; a turn waits only this long, then goes on).
        """
        try:
            async with asyncio.timeout(self._config.ready_wait_s):
                while self.offer is None and self.failed_attempts == 0 and self.state is ConnectionState.CONNECTING:
                    await self._state_changed.wait()
        except TimeoutError:
            logger.info(
                "MCP server {!r} still connecting after ready_wait_s={:g}s; this turn goes on without it",
                self.server, self._config.ready_wait_s,
            )

    async def run(self) -> None:
        """Own the session until `close()`: connect, serve, reconnect after faults.

        Never raises except `CancelledError`; faults are logged and retried.
        """
        failures = 0
        try:
            while not self._closing:
                self._set(ConnectionState.CONNECTING)
                was_ready, fault = await self._attempt()
                if self._closing or fault is None:
                    break
                if not was_ready:
                    self.failed_attempts += 1
                if fault.permanent:
                    logger.warning(
                        "MCP server {!r} cannot be started ({}); not retrying", self.server, fault.text
                    )
                    self._set(ConnectionState.FAILED, fault.text)
                    await self._until_closed(None)
                    break
                if was_ready:
                    failures = 0
                delay = self._backoff.delay(failures)
                failures += 1
                logger.warning("MCP server {!r}: {}; reconnecting in {:.2f}s", self.server, fault.text, delay)
                self._backoff_from = asyncio.get_running_loop().time()
                self._retry_at = self._backoff_from + delay
                self._set(ConnectionState.BACKOFF, fault.text)
                await self._back_off()
        finally:
            self._client = None
            self._set(ConnectionState.CLOSED)

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any], *, display: str
    ) -> mcp.types.CallToolResult:
        """Call `tool` on the server; raises `ToolFailure` for every fault."""
        return await self._request(display, lambda client: client.call_tool(tool, dict(arguments)))

    async def read_resource(self, uri: str, *, display: str) -> mcp.types.ReadResourceResult:
        """Read one resource; raises `ToolFailure` for every fault."""
        return await self._request(display, lambda client: client.read_resource(uri))

    async def _request(self, display: str, send: Callable[[Client], Awaitable[_T]]) -> _T:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED
        from pydantic import ValidationError

        timeout = self._config.tool_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        client: Client | None = None
        try:
            async with asyncio.timeout_at(deadline):
                client = await self._ready_client(display, deadline)
                lost = self._session_lost
                try:
                    return await send(client)
                except MCPError:
                    if not lost.is_set:
                        raise
                # The server forgot the session (restart, expiry): the spec says start a new
                # one. The call was refused, not run, so it is retried once on the new session.
                logger.info("MCP server {!r} forgot the session; starting a new one for {}", self.server, display)
                self._end_session_of(client, "the server forgot the session")
                client = await self._ready_client(display, deadline)
                return await send(client)
        except TimeoutError:
            if client is not None:
                self._probe(client)  # a wedged server fails the probe and is restarted
            logger.warning("MCP server {!r}: {} timed out after {:g}s", self.server, display, timeout)
            reason = f"MCP server {self.server!r} did not answer within {timeout:g}s"
            raise ToolFailure(display, reason) from None
        except ToolFailure:
            raise
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                reason = f"MCP server {self.server!r} refused the request: {exc.message}"
                raise ToolFailure(display, reason) from None
            logger.warning("MCP server {!r}: connection lost during {}", self.server, display)
            self._restart(client)
            raise ToolFailure(
                display,
                f"the connection to MCP server {self.server!r} was lost during the call; "
                "it is being restarted",
            ) from None
        except ValidationError as exc:
            logger.warning("MCP server {!r} sent a malformed answer to {}: {}", self.server, display, exc)
            raise ToolFailure(display, f"MCP server {self.server!r} sent a malformed answer") from None
        except Exception as exc:  # any transport fault: this call fails, the session restarts
            logger.opt(exception=exc).warning("MCP server {!r}: {} failed", self.server, display)
            self._restart(client)
            raise ToolFailure(display, f"MCP server {self.server!r} failed ({type(exc).__name__})") from None

    async def _ready_client(self, display: str, deadline: float) -> Client:
        """Return the live session, waiting for one while the server (re)connects.

        The wait is bounded by the server's `ready_wait_s` (and the call's own deadline);
        meanwhile the reconnect backoff is cut to `_HURRIED_BACKOFF_S`, so a server that
        comes back within the wait serves the call.
        """
        loop = asyncio.get_running_loop()
        wait_s = self._config.ready_wait_s
        give_up = min(deadline, loop.time() + wait_s)
        self._waiting += 1
        self._hurry.set()
        try:
            while True:
                ending = self._wake.is_set()  # the session is ending: wait for the next one
                if self.state is ConnectionState.READY and self._client is not None and not ending:
                    return self._client
                if self.state is ConnectionState.FAILED:
                    raise ToolFailure(display, f"MCP server {self.server!r} is unavailable: {self.last_error}")
                if self.state is ConnectionState.CLOSED:
                    raise ToolFailure(display, f"MCP server {self.server!r} is shut down")
                retry_at = min(self._retry_at, self._backoff_from + _HURRIED_BACKOFF_S)
                left = give_up - loop.time()
                if left <= 0 or (self.state is ConnectionState.BACKOFF and retry_at >= give_up):
                    raise ToolFailure(
                        display,
                        f"MCP server {self.server!r} is down ({self.last_error}); it is being restarted "
                        f"(waited {wait_s:g}s, its ready_wait_s)",
                    )
                changed = self._state_changed
                try:
                    async with asyncio.timeout(left):
                        await changed.wait()
                except TimeoutError:
                    continue  # the wait is over: the checks above say so
        finally:
            self._waiting -= 1

    def _restart(self, client: Client | None) -> None:
        self._end_session_of(client, "a call failed at the transport level")

    def _end_session_of(self, client: Client | None, reason: str) -> None:
        # Only the session the failing call used; a newer one is left alone.
        if client is not None and client is self._client:
            self._end_session(reason)

    def _probe(self, client: Client) -> None:
        if client is self._client:
            self._refresh.set()

    def _end_session(self, reason: str) -> None:
        if self._end_reason is None:
            self._end_reason = reason
        self._wake.set()

    async def _attempt(self) -> tuple[bool, _Fault | None]:
        """Run one session; return whether it became ready and the fault that ended it."""
        from mcp import Client
        from mcp.types import Implementation

        self._wake.clear()
        self._refresh.clear()
        self._end_reason = None
        self._unreadable = 0
        lost = self._session_lost = _Flag()
        ready = False
        deadline = asyncio.get_running_loop().time() + self._connect_timeout_s
        try:
            client = Client(
                open_transport(
                    self._config,
                    base=self._base,
                    on_lost=lambda: self._end_session("the server closed the connection"),
                    on_session_lost=lost.mark,
                ),
                cache=None,  # a list-changed refresh must reach the server, never a cached page
                message_handler=self._on_message,
                client_info=Implementation(name=_CLIENT_NAME, version="0"),
            )
            async with AsyncExitStack() as stack:
                async with asyncio.timeout_at(deadline):
                    await stack.enter_async_context(client)
                async with asyncio.TaskGroup() as group:
                    subscribed = asyncio.Event()
                    listener = group.create_task(self._listen(client, subscribed))
                    try:
                        # Subscribe before listing, so no change can fall between the two.
                        async with asyncio.timeout_at(deadline):
                            await subscribed.wait()
                            offer = await _list(client)
                    except TimeoutError:
                        listener.cancel()
                        return ready, _Fault(f"no answer within {self._connect_timeout_s:g}s", permanent=False)
                    self._client = client
                    self._publish(offer)
                    ready = True
                    logger.info("MCP server {!r} connected ({} tools)", self.server, len(offer.tools))
                    self._set(ConnectionState.READY)
                    refresher = group.create_task(self._refresher(client))
                    await self._wake.wait()
                    self._client = None
                    listener.cancel()
                    refresher.cancel()
        except TimeoutError:
            return ready, _Fault(f"no answer within {self._connect_timeout_s:g}s", permanent=False)
        except Exception as exc:
            return ready, _classify(exc)
        finally:
            self._client = None
            if self._unreadable > 1:
                logger.warning("MCP server {!r}: {} lines of output that is not MCP on that connection",
                               self.server, self._unreadable)
        if self._closing:
            return ready, None
        return ready, _Fault(self._end_reason or "the session ended", permanent=False)

    async def _listen(self, client: Client, subscribed: asyncio.Event) -> None:
        # 2026-07-28 servers announce list changes on a `subscriptions/listen` stream; older
        # ones send `notifications/tools/list_changed`, which `_on_message` sees.
        try:
            async with client.listen(tools_list_changed=True, resources_list_changed=True) as events:
                subscribed.set()
                async for _event in events:
                    self._refresh.set()
        except Exception as exc:  # not offered by this server or its protocol version
            logger.debug("MCP server {!r}: no change subscription ({})", self.server, exc)
        finally:
            subscribed.set()

    async def _refresher(self, client: Client) -> None:
        while True:
            await self._refresh.wait()
            self._refresh.clear()
            try:
                async with asyncio.timeout(min(self._connect_timeout_s, self._config.tool_timeout_s)):
                    offer = await _list(client)
            except Exception as exc:
                self._end_session(f"a listing failed ({_describe(exc)})")
                return
            self._publish(offer)

    async def _on_message(self, message: IncomingMessage) -> None:
        import mcp.types as types

        if isinstance(message, (types.ToolListChangedNotification, types.ResourceListChangedNotification)):
            self._refresh.set()
        elif isinstance(message, Exception):
            # Once per connection, then counted: a noisy server must not flood the log.
            self._unreadable += 1
            if self._unreadable == 1:
                first = (str(message).strip().splitlines() or [type(message).__name__])[0][:200]
                logger.warning(
                    "MCP server {!r} wrote output that is not MCP ({}); more of it on this connection "
                    "is counted, not logged", self.server, first,
                )

    def _publish(self, offer: ServerOffer) -> None:
        if offer != self.offer:
            self.offer = offer
            for remote in offer.tools:  # once per new listing, never per turn
                reason = unusable_reason(self.server, remote)
                if reason is not None:
                    logger.warning("MCP server {!r}: tool {!r} is not offered: {}", self.server, remote.name, reason)
            self._on_offer()

    def _set(self, state: ConnectionState, error: str | None = None) -> None:
        self.state = state
        if error is not None or state is ConnectionState.READY:
            self.last_error = error
        self._ever_ready = self._ever_ready or state is ConnectionState.READY
        value = lifecycle_of(state, ever_ready=self._ever_ready)
        left = self.lifecycle.move(value, error)
        if left is not None:
            if value is Lifecycle.RECONNECTING or (value is Lifecycle.STOPPED and error):
                # Bound as a lifecycle line: the status document's `last_errors` keeps it.
                logger.bind(lifecycle=f"mcp {self.server}").warning(
                    "MCP server {!r} is {} (was {}): {}", self.server, value.value, left.value, error
                )
            else:
                logger.debug("MCP server {!r} is {} (was {})", self.server, value.value, left.value)
        self._state_changed.set()
        self._state_changed = asyncio.Event()

    async def _back_off(self) -> None:
        """Wait out the backoff (until `_retry_at`, or `_HURRIED_BACKOFF_S` after it began
        while a call waits for the server), or until `close()`."""
        loop = asyncio.get_running_loop()
        while not self._closing:
            until = self._retry_at
            if self._waiting:
                until = min(until, self._backoff_from + _HURRIED_BACKOFF_S)
            left = until - loop.time()
            if left <= 0:
                return
            self._hurry.clear()
            try:
                async with asyncio.timeout(left):
                    await self._hurry.wait()  # a call began waiting, or `close()`: re-time
            except TimeoutError:
                pass

    async def _until_closed(self, delay: float | None) -> None:
        """Sleep `delay` seconds (None: forever), or until `close()`."""
        try:
            async with asyncio.timeout(delay):
                while not self._closing:
                    self._wake.clear()
                    await self._wake.wait()
        except TimeoutError:
            pass


class _Flag:
    """Set once, by the transport of one session; read by the calls made in that session."""

    __slots__ = ("is_set",)

    def __init__(self) -> None:
        self.is_set = False

    def mark(self) -> None:
        self.is_set = True


@dataclass(frozen=True, slots=True)
class _Fault:
    text: str
    permanent: bool


async def _list(client: Client) -> ServerOffer:
    import mcp.types as types

    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    resources: list[types.Resource] = []
    if client.server_capabilities.resources is not None:
        cursor = None
        for _ in range(_MAX_PAGES):
            listing = await client.list_resources(cursor=cursor)
            resources.extend(listing.resources)
            cursor = listing.next_cursor
            if not cursor:
                break
    return ServerOffer.from_listing(tools, resources)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _classify(exc: BaseException) -> _Fault:
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, SecretError):
            return _Fault(str(leaf), permanent=True)
        if isinstance(leaf, (FileNotFoundError, PermissionError)):
            return _Fault(f"cannot start the command: {leaf.strerror or leaf}", permanent=True)
        status = getattr(getattr(leaf, "response", None), "status_code", None)
        if status in (401, 403):
            return _Fault(f"the server refused the credentials (HTTP {status})", permanent=True)
    return _Fault(_describe(exc), permanent=False)


def _describe(exc: BaseException) -> str:
    leaf = _leaves(exc)[0]
    text = str(leaf).strip().splitlines()[0] if str(leaf).strip() else ""
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
