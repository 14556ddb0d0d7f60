"""Built-in workspace file tools: `file_read`, `file_write` and `list_dir`."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from orchestrator.errors import ToolFailure, WorkspaceEscape
from orchestrator.tools.base import BuiltinTool, ToolSpec

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
    "FileWrite",
    "ListDir",
]

MAX_READ_BYTES: Final = 1024 * 1024
MAX_LIST_ENTRIES: Final = 1000
# Below this size a read or write finishes faster than a thread hop would.
_THREAD_THRESHOLD: Final = 64 * 1024
# O_NOFOLLOW: the confined path is symlink-free, so a symlink found at open time was
# swapped in after the check. O_NONBLOCK: opening a FIFO must not hang the loop.
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# No O_TRUNC: the link count is checked on the open file first, then it is truncated.
_WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _path_schema(description: str) -> MappingProxyType[str, Any]:
    return MappingProxyType({"type": "string", "description": description})


FILE_READ_SPEC: Final = ToolSpec(
    name="file_read",
    description="Read a UTF-8 text file from the agent workspace.",
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType(
                {"path": _path_schema("File path relative to the workspace root.")}
            ),
            "required": ("path",),
            "additionalProperties": False,
        }
    ),
    read_only=True,
)

FILE_WRITE_SPEC: Final = ToolSpec(
    name="file_write",
    description=(
        "Write UTF-8 text to a file in the agent workspace, replacing it and creating "
        "missing parent directories."
    ),
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType(
                {
                    "path": _path_schema("File path relative to the workspace root."),
                    "content": MappingProxyType(
                        {"type": "string", "description": "The complete new file content."}
                    ),
                }
            ),
            "required": ("path", "content"),
            "additionalProperties": False,
        }
    ),
    read_only=False,
)

LIST_DIR_SPEC: Final = ToolSpec(
    name="list_dir",
    description=(
        "List a workspace directory, one entry per line, sorted; directories end with '/'."
    ),
    parameters=MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType(
                {
                    "path": _path_schema(
                        "Directory relative to the workspace root; defaults to '.'."
                    )
                }
            ),
            "required": (),
            "additionalProperties": False,
        }
    ),
    read_only=True,
)


_PATH_ONLY: Final = frozenset({"path"})
_PATH_AND_CONTENT: Final = frozenset({"path", "content"})


def _check_names(tool: str, arguments: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise ToolFailure(tool, f"unexpected argument(s): {', '.join(unknown)}")


def _string(tool: str, arguments: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if value is None:
        raise ToolFailure(tool, f"missing required argument {name!r}")
    if not isinstance(value, str):
        raise ToolFailure(tool, f"argument {name!r} must be a string, not {type(value).__name__}")
    return value


def _confine(tool: str, policy: SecurityPolicy, path: str) -> Path:
    try:
        return policy.confine(path)
    except WorkspaceEscape as exc:
        raise ToolFailure(tool, f"refused: {exc}") from exc


def _os_failure(tool: str, action: str, path: str, exc: OSError) -> ToolFailure:
    return ToolFailure(tool, f"cannot {action} {path!r}: {exc.strerror or exc}")


@dataclass(frozen=True, slots=True)
class FileRead:
    """`file_read` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `file_read` spec."""
        return FILE_READ_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return the file's text; raises `ToolFailure` for escapes, missing or binary files."""
        tool = FILE_READ_SPEC.name
        _check_names(tool, arguments, _PATH_ONLY)
        path = _string(tool, arguments, "path")
        target = _confine(tool, self.policy, path)
        try:
            info = target.stat()
        except FileNotFoundError:
            raise ToolFailure(tool, f"no such file: {path!r}") from None
        except OSError as exc:
            raise _os_failure(tool, "read", path, exc) from exc
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure(tool, f"{path!r} is a directory; use list_dir")
        if info.st_size > _THREAD_THRESHOLD:
            return await asyncio.to_thread(_read_text, path, target)
        return _read_text(path, target)


def _read_text(path: str, target: Path) -> str:
    tool = FILE_READ_SPEC.name
    try:
        fd = os.open(target, _READ_FLAGS)
    except FileNotFoundError:
        raise ToolFailure(tool, f"no such file: {path!r}") from None
    except OSError as exc:
        raise _os_failure(tool, "read", path, exc) from exc
    with open(fd, "rb", closefd=True) as handle:
        info = os.fstat(handle.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure(tool, f"{path!r} is a directory; use list_dir")
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure(tool, f"{path!r} is not a regular file")
        _check_single_link(tool, path, info)
        if info.st_size > MAX_READ_BYTES:
            limit = f"file_read returns at most {MAX_READ_BYTES}"
            raise ToolFailure(tool, f"{path!r} is {info.st_size} bytes; {limit}")
        data = handle.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise ToolFailure(tool, f"{path!r} grew past {MAX_READ_BYTES} bytes while being read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailure(
            tool, f"{path!r} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def _check_single_link(tool: str, path: str, info: os.stat_result) -> None:
    # A hard link planted in the workspace (`ln /elsewhere/secret x`) resolves inside it,
    # yet names a file outside: no path check can see that, the link count can.
    if info.st_nlink > 1:
        raise ToolFailure(
            tool, f"refused: {path!r} has {info.st_nlink} hard links (it may be a file outside the workspace)"
        )


@dataclass(frozen=True, slots=True)
class FileWrite:
    """`file_write` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `file_write` spec."""
        return FILE_WRITE_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Replace the file's content; raises `ToolFailure` for escapes and OS errors."""
        tool = FILE_WRITE_SPEC.name
        _check_names(tool, arguments, _PATH_AND_CONTENT)
        path = _string(tool, arguments, "path")
        try:
            data = _string(tool, arguments, "content").encode("utf-8")
        except UnicodeEncodeError:
            raise ToolFailure(tool, "content is not valid Unicode text") from None
        target = _confine(tool, self.policy, path)
        if target.is_dir():
            raise ToolFailure(tool, f"{path!r} is a directory")
        if len(data) > _THREAD_THRESHOLD:
            await asyncio.to_thread(self._write, path, target, data)
        else:
            self._write(path, target, data)
        return f"wrote {len(data)} bytes to {path}"

    def _write(self, path: str, target: Path, data: bytes) -> None:
        tool = FILE_WRITE_SPEC.name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_failure(tool, "create the parent directory of", path, exc) from exc
        # A parent swapped for a symlink between the check and mkdir shows up here.
        if _confine(tool, self.policy, path) != target:
            raise ToolFailure(tool, f"refused: {path!r} changed while being written")
        try:
            fd = os.open(target, _WRITE_FLAGS, 0o644)
        except OSError as exc:
            raise _os_failure(tool, "write", path, exc) from exc
        with open(fd, "wb", closefd=True) as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode):
                _check_single_link(tool, path, info)
            handle.truncate(0)
            handle.write(data)


@dataclass(frozen=True, slots=True)
class ListDir:
    """`list_dir` bound to one agent's workspace."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `list_dir` spec."""
        return LIST_DIR_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return sorted entries, one per line; raises `ToolFailure` for escapes and non-dirs."""
        tool = LIST_DIR_SPEC.name
        _check_names(tool, arguments, _PATH_ONLY)
        path = _string(tool, arguments, "path", default=".")
        target = _confine(tool, self.policy, path)
        names: list[str] = []
        try:
            with os.scandir(target) as entries:
                for entry in entries:
                    names.append(entry.name + "/" if _is_dir(entry) else entry.name)
        except FileNotFoundError:
            raise ToolFailure(tool, f"no such directory: {path!r}") from None
        except NotADirectoryError:
            raise ToolFailure(tool, f"{path!r} is not a directory; use file_read") from None
        except OSError as exc:
            raise _os_failure(tool, "list", path, exc) from exc
        if not names:
            return "(empty directory)"
        names.sort()
        if len(names) > MAX_LIST_ENTRIES:
            hidden = len(names) - MAX_LIST_ENTRIES
            names[MAX_LIST_ENTRIES:] = [f"... {hidden} more entries not shown"]
        return "\n".join(names)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


FILE_READ: Final = BuiltinTool(spec=FILE_READ_SPEC, bind=FileRead)
FILE_WRITE: Final = BuiltinTool(spec=FILE_WRITE_SPEC, bind=FileWrite)
LIST_DIR: Final = BuiltinTool(spec=LIST_DIR_SPEC, bind=ListDir)
