"""The `send_file` tool: post a workspace file to the chat the current turn answers.

The seam offers it only when the agent names it in `tools` and the path has a chat (a
channel turn, a schedule with `deliver_to`); the chat itself is the turn's `ChatOutlet`,
which the daemon (or the scheduler, for the `deliver_to` chat) binds for the turn
(`bind_outlet`), so the tool can post only into the conversation it was called from.
The file is opened once, beneath the workspace's descriptor without following any link
(`WorkspaceDir.open_read`: a regular file with one link, checked on the open descriptor),
capped by the platform's `max_file_bytes`, and the outlet gets that open file: nothing
re-opens the path, so a link swapped in after the check is never followed.
"""

from __future__ import annotations

import io
import mimetypes
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import Field

from orchestrator.errors import OrchestratorError, ToolFailure
from orchestrator.tools.base import ToolSource, ToolSpec
from orchestrator.tools.contract import ToolArguments
from orchestrator.tools.reserved import SEND_FILE_NAME
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["SEND_FILE_SPEC", "ChatOutlet", "SendFileArguments", "SendFileTool", "bind_outlet", "current_outlet"]

_MAX_CAPTION: Final = 1000


class SendFileArguments(ToolArguments):
    """The `send_file` tool's arguments."""

    path: str = Field(min_length=1, description="File path relative to the workspace root.")
    caption: str = Field(default="", description="Optional short caption.")


SEND_FILE_SPEC: Final = ToolSpec(
    name=SEND_FILE_NAME,
    description=(
        "Send a file from the agent workspace to the current chat (images are shown inline). "
        "Use it when the user asked for a file, not to repeat text you can write in the answer."
    ),
    contract=SendFileArguments,
    read_only=False,
    source=ToolSource.SEAM,
)


class ChatOutlet(Protocol):
    """The chat a turn answers, able to take a file (the daemon wraps the adapter)."""

    @property
    def max_file_bytes(self) -> int: ...

    async def send_file(self, content: io.BufferedReader, *, size: int, name: str, mime: str, caption: str | None) -> str:
        """Post the open, checked file `content` (`size` bytes); return the platform message id.

        Raises an `OrchestratorError` on failure; the caller closes `content`.
        """
        ...


_outlet: ContextVar[ChatOutlet | None] = ContextVar("orchestrator_chat_outlet", default=None)


def current_outlet() -> ChatOutlet | None:
    """Return the chat the running turn answers, or None (no chat: CLI, gateway, a schedule without `deliver_to`)."""
    return _outlet.get()


@contextmanager
def bind_outlet(outlet: ChatOutlet) -> Iterator[None]:
    """Make `outlet` the current turn's chat for the duration of the block."""
    token = _outlet.set(outlet)
    try:
        yield
    finally:
        _outlet.reset(token)


class SendFileTool:
    """Posts one workspace file to the current chat."""

    __slots__ = ("_security",)

    def __init__(self, *, security: SecurityPolicy) -> None:
        self._security = security

    @property
    def spec(self) -> ToolSpec:
        return SEND_FILE_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Send the file; raises `ToolFailure` for escapes, missing or oversize files, or no chat."""
        tool = SEND_FILE_NAME
        checked = SendFileArguments.parse(tool, arguments)
        path, caption = checked.path, checked.caption
        outlet = current_outlet()
        if outlet is None:
            raise ToolFailure(tool, "this turn has no chat to send a file to")
        content = self._open(path)
        with content:
            size = os.fstat(content.fileno()).st_size
            if size > outlet.max_file_bytes:
                raise ToolFailure(
                    tool, f"{path!r} is {size:,} bytes; this chat takes files up to {outlet.max_file_bytes:,} bytes"
                )
            name = path.rstrip("/").rsplit("/", 1)[-1]
            mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
            try:
                message_id = await outlet.send_file(
                    content, size=size, name=name, mime=mime, caption=caption[:_MAX_CAPTION] if caption else None
                )
            except OrchestratorError as exc:
                raise ToolFailure(tool, f"the chat refused the file: {exc}") from exc
        return f"sent {path} ({size:,} bytes) to the chat as message {message_id}"

    def _open(self, path: str) -> io.BufferedReader:
        """Open `path` once beneath the workspace (a regular file with one link, no link on the way)."""
        tool = SEND_FILE_NAME
        try:
            with WorkspaceDir.open(self._security.workspace) as workspace:
                return workspace.open_read(path)
        except UnsafeEntry as exc:
            raise ToolFailure(tool, str(exc)) from None
        except FileNotFoundError:
            raise ToolFailure(tool, f"no such file: {path!r}") from None
        except OSError as exc:
            raise ToolFailure(tool, f"cannot read {path!r}: {exc.strerror or exc}") from None
