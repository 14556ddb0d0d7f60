"""`orchestrator acp --agent A`: one agent over the Agent Client Protocol on stdio (fast boot).

stdout carries the protocol and nothing else: the protocol streams are bound first, then
`sys.stdout` is pointed at stderr, so a stray print can never corrupt a frame.

Sessions are stored in the daemon's `sessions.sqlite3` (key `acp:<agent>:<session id>`) after
every turn, so `session/load` resumes them in a later process; that is one SQLite file, not
the MCP servers or the memory store the fast path skips (unless a delegate target uses them).
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import uuid
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final, cast

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    StopReason as AcpStopReason,
)
from loguru import logger

from orchestrator.acp.framing import line_limit, screen_input
from orchestrator.acp.history import AcpHistory, StoredTranscript
from orchestrator.acp.media import advertises_audio, not_advertised, take_in_prompt
from orchestrator.acp.session import AcpSession
from orchestrator.acp.stdio import open_stdio
from orchestrator.engine import StopReason
from orchestrator.media import MediaRefused
from orchestrator.seam import ConstructionPath, Services, build_acp, open_services
from orchestrator.sessions import HeldTranscript, Sessions

if TYPE_CHECKING:
    import acp

    from orchestrator.config import Config
    from orchestrator.seam import ResolvedAgentExecution
    from orchestrator.store import SessionStore

__all__ = ["AcpServer", "serve_acp"]

_PATH: Final = ConstructionPath.ACP
_STOP: Final[dict[StopReason, AcpStopReason]] = {
    StopReason.COMPLETED: "end_turn",
    StopReason.ITERATION_CAP: "max_turn_requests",
    StopReason.TIMEOUT: "end_turn",
    StopReason.NO_PROGRESS: "end_turn",
    StopReason.PROVIDER_ERROR: "end_turn",
    StopReason.TOKEN_BUDGET: "max_tokens",
    StopReason.CONTEXT_OVERFLOW: "max_tokens",
}


async def serve_acp(config: Config, agent: str) -> int:
    """Serve `agent` on stdin/stdout until the client closes stdin; return the exit code.

    Opens only what the ACP path's resolved policy needs (`open_services`): the agent's MCP
    servers only when it sets `acp_enable_mcp`, its memory never (the path strips memory),
    and the memory store and servers of the agents it can delegate to. Raises
    `UnknownAgent` before any protocol traffic when the agent is not configured.
    """
    async with AsyncExitStack() as stack:
        # The path's own knobs keep the boot fast: no MCP (unless `acp_enable_mcp`), no memory
        # for the agent itself; what its delegate targets need is opened for them.
        services = await stack.enter_async_context(open_services(config, [agent], _PATH))
        store = _open_store(config, stack)
        # fail before speaking, not mid-session; the longest line is the largest prompt the media caps allow
        limit = line_limit(build_acp(config, agent, services).media)
        stdin, writer = await open_stdio(limit=limit)
        sys.stdout = sys.stderr  # the real stdout now belongs to the protocol writer alone
        history = AcpHistory(agent=agent, store=store)
        server = AcpServer(config=config, agent=agent, services=services, history=history)
        logger.debug("acp: serving agent {} on stdio", agent)
        reader, feed = screen_input(stdin, writer, cancel=server.cancel, limit=limit)
        try:
            async with asyncio.TaskGroup() as group:
                feeder = group.create_task(feed())
                try:
                    await run_agent(cast("acp.Agent", server), writer, reader)
                finally:
                    feeder.cancel()  # the connection ended: stop reading stdin
        finally:
            await server.aclose()
            sys.stdout = sys.__stdout__
    return 0


def _open_store(config: Config, stack: AsyncExitStack) -> SessionStore:
    """Open the session store; `StateError` (one line) when we cannot.

    Required, as the audit log is (`open_services` opens it): a session a client could not
    load again is not a degraded mode worth serving silently.
    """
    from orchestrator.store import SessionStore

    return stack.enter_context(SessionStore(config.state_path() / "sessions.sqlite3"))


class AcpServer:
    """The ACP agent side: initialize, session/new, session/load, session/prompt, session/cancel."""

    def __init__(self, *, config: Config, agent: str, services: Services, history: AcpHistory) -> None:
        self._config = config
        self._agent = agent
        self._services = services
        self._history = history
        self._sessions: dict[str, AcpSession] = {}
        self._turns = Sessions(transcripts=_LiveTranscripts(history, self._sessions))
        self._client: acp.Client | None = None
        self._client_name = "client"
        self._actor = _acp_user()
        self._initialized = False

    def on_connect(self, conn: acp.Client) -> None:
        """Keep the client side of the connection (updates and permission requests go there)."""
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        """Answer the handshake: our protocol version and what we support."""
        if client_info is not None and getattr(client_info, "name", None):
            self._client_name = str(client_info.name)
        self._initialized = True
        media = build_acp(self._config, self._agent, self._services).media
        # The spec: answer the version asked for when supported, else the latest supported
        # (only PROTOCOL_VERSION is, so a client asking 0 or a future version gets it).
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # image (and audio) only when this agent's media policy takes them (`media.prompt_media`)
                prompt_capabilities=PromptCapabilities(
                    embedded_context=True, image=media.takes_images, audio=advertises_audio(media)
                ),
            ),
            agent_info=Implementation(name="orchestrator", title=f"orchestrator: {self._agent}", version="0.1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        """Start a stored session; the client's cwd and MCP servers grant nothing."""
        _ignore_client_mcp(mcp_servers)
        client = self._connection()
        self._require_initialized()
        session_id = uuid.uuid4().hex
        self._sessions[session_id] = self._session(client, session_id, self._history.start(session_id))
        logger.debug("acp: session {} started for {}", session_id, self._agent)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """Resume a stored session of this agent: replay its conversation, then answer.

        Raises `invalid_params` when this agent has no stored session with that id. Only
        messages are restored; every prompt still resolves policy afresh. The client's cwd
        and MCP servers grant nothing, as for `session/new`.
        """
        _ignore_client_mcp(mcp_servers)
        client = self._connection()
        self._require_initialized()
        live = self._sessions.get(session_id)
        if live is not None and self._turns.busy(session_id):
            raise RequestError.invalid_request({"sessionId": "a prompt is running in this session"})
        keep = build_acp(self._config, self._agent, self._services).context.hold_messages
        if live is not None:
            self._history.save(live.stored, keep=keep)  # the store is what we load from
        loaded = self._history.load(session_id, keep=keep)
        if loaded is None:
            raise RequestError.invalid_params(
                {"sessionId": f"no stored session {session_id!r} for agent {self._agent!r}"}
            )
        stored, conversation = loaded
        session = self._sessions[session_id] = self._session(client, session_id, stored)
        await session.replay(conversation)
        logger.debug("acp: session {} loaded for {} ({} messages)", session_id, self._agent, len(conversation))
        return LoadSessionResponse()

    def _require_initialized(self) -> None:
        if not self._initialized:
            raise RequestError.invalid_request({"reason": "send initialize before opening a session"})

    def _connection(self) -> acp.Client:
        if self._client is None:
            raise RequestError.internal_error({"reason": "no client connection"})
        return self._client

    def _session(self, client: acp.Client, session_id: str, stored: StoredTranscript) -> AcpSession:
        return AcpSession(session_id=session_id, client=client, decided_by=f"acp:{self._client_name}", stored=stored)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        """Run one turn, streaming tool calls and the reply; `cancelled` when session/cancel cut it."""
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        if self._turns.busy(session_id):
            raise RequestError.invalid_request({"sessionId": "a prompt is already running in this session"})
        execution: ResolvedAgentExecution = build_acp(self._config, self._agent, self._services)
        refused = not_advertised(prompt, execution.media)
        if refused:  # not advertised in promptCapabilities: say so rather than drop it silently
            raise RequestError.invalid_params(
                {"prompt": f"this agent does not accept {' or '.join(refused)} content; send text or resources"}
            )
        try:
            intake = await take_in_prompt(prompt, execution, text=_prompt_text(prompt))
        except MediaRefused as exc:  # one clear line; the turn does not run and nothing is kept
            await session.say(exc.reason)
            return PromptResponse(stop_reason="refusal")
        session.streamed = False
        try:
            # Stored after the turn whatever happened, cancelled too: the engine answered its
            # open calls first, so the transcript is well-formed.
            turn = await self._turns.run_turn(
                session_id, agent=self._agent, execution=execution, text=intake.text,
                approver=session.approve, actor=self._actor, events=session.on_event, stream=True,
                media=intake.media,
            )
        finally:
            session.current_call = None
        if turn.result is None:  # session/cancel
            await session.fail_open_calls("not run: the turn was cancelled")
            return PromptResponse(stop_reason="cancelled")
        result = turn.result
        logger.debug("acp: session {} turn ended: {}", session_id, result.stop.value)
        # A completed answer has already streamed; a stop message the engine wrote has not
        # (it may follow an answer cut off mid-stream, hence the break).
        if result.text and (result.stop is not StopReason.COMPLETED or not session.streamed):
            await session.say(f"\n\n{result.text}" if session.streamed else result.text)
        return PromptResponse(stop_reason=_STOP[result.stop])

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Cancel the session's running turn (the engine closes its pending tool calls)."""
        if session_id in self._sessions:
            self._turns.stop(session_id)

    async def aclose(self) -> None:
        """Cancel every running turn (the client went away)."""
        self._turns.stop_all()


class _LiveTranscripts:
    """The transcript source of ACP turns: each live session's, stored in its `AcpHistory`."""

    def __init__(self, history: AcpHistory, live: dict[str, AcpSession]) -> None:
        self._history = history
        self._live = live

    def open(self, key: str, agent: str, *, keep: int) -> StoredTranscript:
        return self._live[key].stored

    def save(self, held: HeldTranscript, *, keep: int) -> None:
        if not isinstance(held, StoredTranscript):
            raise TypeError(f"not an ACP session transcript: {held!r}")
        self._history.save(held, keep=keep)


def _ignore_client_mcp(servers: Any) -> None:
    if servers:
        logger.info("ignoring {} MCP server(s) offered by the ACP client: policy decides MCP", len(servers))


def _prompt_text(blocks: list[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[{block.name}]({block.uri})")
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(f"{block.resource.uri}:\n{block.resource.text}")
    return "\n\n".join(parts)


def _acp_user() -> str | None:
    try:
        return f"acp:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (e.g. an unnamed container uid)
        return None
