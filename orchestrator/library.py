"""The library API: `Agent.from_config(...)` runs an agent's turns in-process, through the seam.

    async with Agent.from_config("config.toml", "ops") as agent:
        result = await agent.run("what is in notes.txt?", session="s1")
        print(result.text)
        await agent.run("what is this?", attachments=[Attachment.from_path("photo.jpg")])

Without an approver every call that needs approval is denied ("no operator decided");
with one, the turn is interactive and the approver decides. Attachments go through the
one media intake under the agent's `[agents.X.media]` policy, as on every path.
"""

from __future__ import annotations

import asyncio
import inspect
import mimetypes
import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Final, TypeAlias

from channels import AttachmentTooLarge
from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.engine import TurnResult
from orchestrator.errors import OrchestratorError, UnknownAgent
from orchestrator.media import Incoming, MediaRefused, bytes_fetch, take_in
from orchestrator.policy import ApprovalDecision, ApprovalRequest, Interactivity, Verdict
from orchestrator.seam import ConstructionPath, Services, build_library, open_services
from orchestrator.sessions import MemoryTranscripts, Sessions
from orchestrator.threads import in_thread

__all__ = ["Agent", "AgentClosed", "Attachment", "AttachmentUnreadable", "LibraryApprover", "MediaRefused"]

LibraryApprover: TypeAlias = Callable[
    [ApprovalRequest], "ApprovalDecision | bool | Awaitable[ApprovalDecision | bool]"
]
"""Decides one tool call: return (or await) an `ApprovalDecision`, or True/False."""

_PATH = ConstructionPath.LIBRARY
_KINDS: Final = frozenset({"image", "document", "voice", "audio", "video"})
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One file for `Agent.run(..., attachments=[...])`: a path to read, or bytes; build it with a factory.

    `kind` is what the agent's `media.accept` lists (`image`, `document`, `voice`, `audio`,
    `video`); `mime` its type. A path is read (under the agent's caps, while reading) only
    when the turn's policy has accepted the attachment.
    """

    kind: str
    mime: str
    name: str | None = None
    path: Path | None = None
    data: bytes | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"attachment kind must be one of {', '.join(sorted(_KINDS))}, not {self.kind!r}")
        if (self.path is None) == (self.data is None):
            raise ValueError("an attachment is either a path or bytes (use Attachment.from_path or from_bytes)")

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, kind: str | None = None, mime: str | None = None) -> Attachment:
        """Attach the file at `path`; `mime` defaults to its extension's type, `kind` to the mime's family."""
        where = Path(path)
        guessed = mime or mimetypes.guess_type(where.name)[0] or "application/octet-stream"
        return cls(kind=kind or _kind_of(guessed), mime=guessed, name=where.name, path=where)

    @classmethod
    def from_bytes(cls, data: bytes, *, name: str, mime: str, kind: str | None = None) -> Attachment:
        """Attach `data` as a file called `name` of type `mime`; `kind` defaults to the mime's family."""
        return cls(kind=kind or _kind_of(mime), mime=mime, name=name, data=bytes(data))


class AttachmentUnreadable(OrchestratorError):
    """A path attachment could not be read (`path`, `reason`)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"cannot read attachment {str(path)!r}: {reason}")


def _kind_of(mime: str) -> str:
    family = mime.split("/", 1)[0].lower()
    return {"image": "image", "audio": "audio", "video": "video"}.get(family, "document")


def _incoming(attachment: Attachment) -> Incoming:
    """Return the intake item for `attachment`; raises `AttachmentUnreadable` for a path that cannot be read."""
    if attachment.data is not None:
        return Incoming(kind=attachment.kind, mime=attachment.mime, size=len(attachment.data), name=attachment.name,
                        fetch=bytes_fetch(attachment.data))
    assert attachment.path is not None
    try:
        size = attachment.path.stat().st_size
    except OSError as exc:
        raise AttachmentUnreadable(attachment.path, exc.strerror or str(exc)) from None
    return Incoming(kind=attachment.kind, mime=attachment.mime, size=size, name=attachment.name,
                    fetch=_path_fetch(attachment.path))


def _path_fetch(source: Path) -> Callable[[BinaryIO, int], Awaitable[int]]:
    """Return a `fetch` that copies `source` (the caller's own file) chunk by chunk into the intake's open file,
    refusing the moment it passes the cap."""

    def copy(dest: BinaryIO, max_bytes: int) -> int:
        size = 0
        with source.open("rb") as reading:
            while chunk := reading.read(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise AttachmentTooLarge("library", f"{source.name} is over the {max_bytes}-byte limit")
                dest.write(chunk)
        return size

    async def fetch(dest: BinaryIO, max_bytes: int) -> int:
        try:
            return await in_thread(copy, dest, max_bytes)
        except OSError as exc:  # the file went away or became unreadable after the check
            raise AttachmentUnreadable(source, exc.strerror or str(exc)) from None

    return fetch


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

    async def run(
        self,
        text: str,
        *,
        session: str = "default",
        actor: str | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> TurnResult:
        """Run one turn in `session` and return its result (`.text` is the reply).

        `actor` names the person the turn runs for (it keys the hourly action budget).
        `attachments` go through the media intake under the agent's policy first: a refused
        one (a kind it does not take, over `max_bytes`, a damaged image, ...) raises
        `MediaRefused` with the reason, and no turn runs and nothing is kept; a path that
        cannot be read raises `AttachmentUnreadable`.
        """
        services = await self._open()
        approver = _Approval(self._approver) if self._approver is not None else None
        execution = build_library(self.config, self.name, services, approver_supplied=self._approver is not None)
        media: tuple[dict[str, Any], ...] = ()
        if attachments:
            items = [_incoming(a) for a in attachments]
            intake = await take_in(execution.media, execution.security, items, text=text)
            text, media = intake.text, intake.media
        turn = await self._sessions.run_turn(
            session, agent=self.name, execution=execution, text=text, approver=approver, actor=actor or "library",
            media=media,
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
