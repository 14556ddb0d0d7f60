"""The library API: `Agent.from_config(...)` runs an agent's turns in-process, through the seam.

    async with Agent.from_config("config.toml", "ops") as agent:
        result = await agent.run("what is in notes.txt?", session="s1")
        print(result.text)

Without an approver every call that needs approval is denied ("no operator decided");
with one, the turn is interactive and the approver decides.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TypeAlias

from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.engine import TurnResult
from orchestrator.errors import OrchestratorError, UnknownAgent
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Interactivity, Verdict
from orchestrator.seam import ConstructionPath, Services, build_library, open_services
from orchestrator.sessions import MemoryTranscripts, Sessions

__all__ = ["Agent", "AgentClosed", "LibraryApprover"]

LibraryApprover: TypeAlias = Callable[
    [ApprovalRequest], "ApprovalDecision | bool | Awaitable[ApprovalDecision | bool]"
]
"""Decides one tool call: return (or await) an `ApprovalDecision`, or True/False."""

_PATH = ConstructionPath.LIBRARY


class AgentClosed(OrchestratorError):
    """`run()` was called on an agent after `aclose()`."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        super().__init__(f"agent {agent!r} is closed")


class Agent:
    """One configured agent, run in-process on the library path; build it with `from_config`.

    It owns its services, opened by the seam's `open_services` for this agent and every
    agent it can delegate to (provider clients, the audit log in the state directory, the
    MCP pool when one has bundles, the memory store when one has memory), on `async with`
    or the first `run()`, and closed by `aclose()`. Sessions live in memory,
    one transcript per `session` id, one turn at a time each.
    """

    def __init__(self, *, config: Config, name: str, approver: LibraryApprover | None, token: object) -> None:
        if token is not _FACTORY:
            raise TypeError("use Agent.from_config(...)")
        self.config = config
        self.name = name
        self._approver = approver
        self._stack: AsyncExitStack | None = None
        self._services: Services | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self._sessions = Sessions(transcripts=MemoryTranscripts(prefix="library:"))

    @classmethod
    def from_config(
        cls, path_or_config: str | Path | Config, name: str, *, approver: LibraryApprover | None = None
    ) -> Agent:
        """Load the config (a path is validated like `orchestrator check`) and bind agent `name`.

        Raises `ConfigError` for an invalid config and `UnknownAgent` for a name it lacks.
        Nothing is opened until `async with` or the first `run()`.
        """
        config = path_or_config if isinstance(path_or_config, Config) else load_config(path_or_config)
        if name not in config.agents:  # fail here, not on the first turn
            raise UnknownAgent(name, sorted(config.agents))
        return cls(config=config, name=name, approver=approver, token=_FACTORY)

    @property
    def interactivity(self) -> Interactivity:
        """INTERACTIVE with an approver, else NON_INTERACTIVE (approvals denied)."""
        return Interactivity.INTERACTIVE if self._approver is not None else Interactivity.NON_INTERACTIVE

    async def run(self, text: str, *, session: str = "default", actor: str | None = None) -> TurnResult:
        """Run one turn in `session` and return its result (`.text` is the reply).

        `actor` names the person the turn runs for (it keys the hourly action budget).
        """
        services = await self._open()
        approver = _Approval(self._approver) if self._approver is not None else None
        turn = await self._sessions.run_turn(
            session,
            agent=self.name,
            execution=lambda: build_library(
                self.config, self.name, services, approver_supplied=self._approver is not None
            ),
            text=text,
            approver=approver,
            actor=actor or "library",
        )
        return turn.completed()

    async def aclose(self) -> None:
        """Close everything the agent opened; safe to call twice."""
        self._closed = True
        stack, self._stack, self._services = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> Agent:
        await self._open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _open(self) -> Services:
        async with self._opening:
            if self._closed:
                raise AgentClosed(self.name)
            if self._services is not None:
                return self._services
            # What this agent and every agent it can delegate to need (ports open on first
            # call); a failed opening has already closed what it opened.
            stack = AsyncExitStack()
            services = await stack.enter_async_context(open_services(self.config, [self.name], _PATH))
            self._stack, self._services = stack, services
            return services


class _Approval:
    """Adapts a caller's approver (sync or async, decision or bool) to the engine's protocol."""

    __slots__ = ("_decide",)

    def __init__(self, decide: LibraryApprover) -> None:
        self._decide = decide

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        answer = self._decide(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ApprovalDecision):
            return answer
        if answer is True:
            return ApprovalDecision(verdict=Verdict.APPROVED, decided_by="library", reason="approved by the caller")
        return ApprovalDecision(verdict=Verdict.DENIED, decided_by="library", reason="refused by the caller")


_FACTORY = object()
