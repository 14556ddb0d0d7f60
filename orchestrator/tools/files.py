"""Built-in workspace file tools: `file_read`, `file_write` and `list_dir`.

Every path is resolved beneath the workspace's descriptor (`orchestrator.workspace_io`): no
symbolic link is followed on any component, a file read or replaced must be a regular file
with one link (checked on the open descriptor), and `file_write` is refused past
`workspace_max_bytes`.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import Field

from orchestrator.errors import ToolFailure
from orchestrator.threads import in_thread
from orchestrator.tools.base import BuiltinTool, ToolSpec
from orchestrator.tools.contract import ToolArguments
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir, WorkspaceFull, workspace_usage

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = [
    "FILE_READ",
    "FILE_READ_SPEC",
    "FILE_WRITE",
    "FILE_WRITE_SPEC",
    "LIST_DIR",
    "LIST_DIR_SPEC",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "FileRead",
    "FileReadArguments",
    "FileWrite",
    "FileWriteArguments",
    "ListDir",
    "ListDirArguments",
]

MAX_READ_BYTES: Final = 1024 * 1024
MAX_LIST_ENTRIES: Final = 1000
# Below this size a read or write finishes faster than a thread hop would.
_THREAD_THRESHOLD: Final = 64 * 1024


_PATH: Final = "File path relative to the workspace root."


class FileReadArguments(ToolArguments):
    """The `file_read` tool's arguments."""

    path: str = Field(description=_PATH)


class FileWriteArguments(ToolArguments):
    """The `file_write` tool's arguments."""

    path: str = Field(description=_PATH)
    content: str = Field(description="The complete new file content.")


class ListDirArguments(ToolArguments):
    """The `list_dir` tool's arguments."""

    path: str = Field(default=".", description="Directory relative to the workspace root; defaults to '.'.")


FILE_READ_SPEC: Final = ToolSpec(
    name="file_read",
    description="Read a UTF-8 text file from the agent workspace.",
    contract=FileReadArguments,
    read_only=True,
)

FILE_WRITE_SPEC: Final = ToolSpec(
    name="file_write",
    description=(
        "Write UTF-8 text to a file in the agent workspace, replacing it and creating "
        "missing parent directories."
    ),
    contract=FileWriteArguments,
    read_only=False,
)

LIST_DIR_SPEC: Final = ToolSpec(
    name="list_dir",
    description=(
        "List a workspace directory, one entry per line, sorted; directories end with '/'."
    ),
    contract=ListDirArguments,
    read_only=True,
)


def _os_failure(tool: str, action: str, path: str, exc: OSError) -> ToolFailure:
    return ToolFailure(tool, f"cannot {action} {path!r}: {exc.strerror or exc}")


def _workspace(tool: str, policy: SecurityPolicy) -> WorkspaceDir:
    try:
        return WorkspaceDir.open(policy.workspace)
    except OSError as exc:
        raise _os_failure(tool, "open the workspace", str(policy.workspace), exc) from exc


@dataclass(frozen=True, slots=True)
class FileRead:
    """`file_read` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `file_read` spec."""
        return FILE_READ_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return the file's text; raises `ToolFailure` for escapes, links, missing or binary files."""
        tool = FILE_READ_SPEC.name
        path = FileReadArguments.parse(tool, arguments).path
        with _workspace(tool, self.policy) as workspace:
            handle = _open_read(workspace, path)
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_READ_BYTES:
                raise ToolFailure(tool, f"{path!r} is {size} bytes; file_read returns at most {MAX_READ_BYTES}")
            if size > _THREAD_THRESHOLD:
                data = await in_thread(handle.read, MAX_READ_BYTES + 1)
            else:
                data = handle.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:
            raise ToolFailure(tool, f"{path!r} grew past {MAX_READ_BYTES} bytes while being read")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailure(
                tool, f"{path!r} is not UTF-8 text (invalid byte at offset {exc.start})"
            ) from None


def _open_read(workspace: WorkspaceDir, path: str) -> io.BufferedReader:
    tool = FILE_READ_SPEC.name
    try:
        return workspace.open_read(path)
    except UnsafeEntry as exc:
        if exc.reason == "is a directory":
            raise ToolFailure(tool, f"{path!r} is a directory; use list_dir") from None
        raise ToolFailure(tool, str(exc)) from None
    except FileNotFoundError:
        raise ToolFailure(tool, f"no such file: {path!r}") from None
    except OSError as exc:
        raise _os_failure(tool, "read", path, exc) from exc


@dataclass(frozen=True, slots=True)
class FileWrite:
    """`file_write` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `file_write` spec."""
        return FILE_WRITE_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Replace the file's content; raises `ToolFailure` for escapes, links, a full workspace and OS errors."""
        tool = FILE_WRITE_SPEC.name
        checked = FileWriteArguments.parse(tool, arguments)
        path = checked.path
        try:
            data = checked.content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolFailure(tool, "content is not valid Unicode text") from None
        if len(data) > _THREAD_THRESHOLD or self.policy.workspace_max_bytes is not None:
            await in_thread(self._write, path, data)
        else:
            self._write(path, data)
        return f"wrote {len(data)} bytes to {path}"

    def _write(self, path: str, data: bytes) -> None:
        tool = FILE_WRITE_SPEC.name
        usage = workspace_usage(self.policy.workspace)
        with _workspace(tool, self.policy) as workspace:
            try:
                old = workspace.lstat(path)
                grows = len(data) - (old.st_size if stat.S_ISREG(old.st_mode) else 0)
            except (FileNotFoundError, NotADirectoryError):
                grows = len(data)
            except UnsafeEntry as exc:
                raise ToolFailure(tool, str(exc)) from None
            except OSError as exc:
                raise _os_failure(tool, "write", path, exc) from exc
            try:
                usage.require(self.policy.workspace_max_bytes, grows)
            except WorkspaceFull as exc:
                raise ToolFailure(tool, f"refused: {path!r} was not written: {exc}") from None
            parent = path.rpartition("/")[0]
            try:
                if parent:
                    workspace.make_dirs(parent)
            except UnsafeEntry as exc:
                raise ToolFailure(tool, str(exc)) from None
            except OSError as exc:
                raise _os_failure(tool, "create the parent directory of", path, exc) from exc
            try:
                handle = workspace.open_write(path)
            except UnsafeEntry as exc:
                raise ToolFailure(tool, str(exc)) from None
            except IsADirectoryError:
                raise ToolFailure(tool, f"{path!r} is a directory") from None
            except OSError as exc:
                raise _os_failure(tool, "write", path, exc) from exc
        with handle:
            handle.write(data)
        usage.add(grows)


@dataclass(frozen=True, slots=True)
class ListDir:
    """`list_dir` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `list_dir` spec."""
        return LIST_DIR_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return sorted entries, one per line; raises `ToolFailure` for escapes, links and non-dirs."""
        tool = LIST_DIR_SPEC.name
        path = ListDirArguments.parse(tool, arguments).path
        with _workspace(tool, self.policy) as workspace:
            try:
                entries = workspace.entries(path)
            except UnsafeEntry as exc:
                raise ToolFailure(tool, str(exc)) from None
            except FileNotFoundError:
                raise ToolFailure(tool, f"no such directory: {path!r}") from None
            except NotADirectoryError:
                raise ToolFailure(tool, f"{path!r} is not a directory; use file_read") from None
            except OSError as exc:
                raise _os_failure(tool, "list", path, exc) from exc
        names = [entry.name + "/" if entry.kind == "dir" else entry.name for entry in entries]
        if not names:
            return "(empty directory)"
        names.sort()
        if len(names) > MAX_LIST_ENTRIES:
            hidden = len(names) - MAX_LIST_ENTRIES
            names[MAX_LIST_ENTRIES:] = [f"... {hidden} more entries not shown"]
        return "\n".join(names)


FILE_READ: Final = BuiltinTool(spec=FILE_READ_SPEC, bind=FileRead)
FILE_WRITE: Final = BuiltinTool(spec=FILE_WRITE_SPEC, bind=FileWrite)
LIST_DIR: Final = BuiltinTool(spec=LIST_DIR_SPEC, bind=ListDir)
