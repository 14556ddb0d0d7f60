"""The daemon's own file I/O inside a workspace: resolved beneath a directory descriptor, never through a link.

A workspace is a folder an agent's commands (and MCP servers) can write, so anything in it
may be a symbolic link, a hard link to a file outside, or swapped between a check and a
use. `WorkspaceDir` holds the workspace root open and does every operation relative to that
descriptor: a path is resolved with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS)` where the kernel has it (Linux 5.6), else by opening each component
with `O_NOFOLLOW | O_DIRECTORY` from the one before; files are created with `O_EXCL`; what was
opened is checked on the descriptor (a regular file with one link, or a directory); and
callers get the open file, never a path to open again. Renames, unlinks, mkdirs, listings
and tree removal take the parent's descriptor (`dir_fd=`), so no link is followed there
either. `WorkspaceUsage` measures a workspace for `workspace_max_bytes`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

from orchestrator.errors import OrchestratorError

__all__ = [
    "RESOLVERS",
    "Resolver",
    "USAGE_TTL_S",
    "Entry",
    "UnsafeEntry",
    "WorkspaceDir",
    "WorkspaceFull",
    "WorkspaceUsage",
    "active_resolver",
    "copy_file",
    "using_resolver",
    "reopen_read_only",
    "workspace_usage",
]

Resolver = Literal["openat2", "walk"]  # how a path is resolved: the kernel call, or the component walk
RESOLVERS: Final[tuple[Resolver, ...]] = ("openat2", "walk")
# A workspace's measured size is reused for this long (plus the daemon's own writes since);
# a command's writes are seen at the next measurement.
USAGE_TTL_S: Final = 5.0
_COPY_CHUNK: Final = 1024 * 1024
_RESOLVER_ENV: Final = "ORCHESTRATOR_WORKSPACE_RESOLVER"  # "walk": force the fallback (tests)

_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture (the unified table)
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_RESOLVE: Final = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_STEP: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted where a file was expected must not hang.
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# No O_TRUNC: the descriptor is checked (regular, one link) before anything is cut.
_REPLACE: Final = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeEntry(OrchestratorError):
    """A workspace path the daemon will not touch: a link on the way, a hard-linked file, the wrong type."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"refused: {path!r} {reason}")


class WorkspaceFull(OrchestratorError):
    """A daemon write would take the workspace past `workspace_max_bytes`."""

    def __init__(self, workspace: str, used: int, limit: int) -> None:
        self.workspace, self.used, self.limit = workspace, used, limit
        super().__init__(f"the workspace is full ({_mb(used)} of its {_mb(limit)} limit)")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_syscall: Any = None  # libc's syscall(2), bound on the first probe
_available: bool | None = None
_forced: list[Resolver] = []
_probe_lock = threading.Lock()


def _openat2_works() -> bool:
    global _syscall, _available
    with _probe_lock:
        if _available is None:
            _available = False
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                call = libc.syscall
                call.restype = ctypes.c_long
                call.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_OpenHow), ctypes.c_size_t]
                _syscall = call
                fd = _openat2(os.open("/", _DIR), ".", _DIR, 0, close_dir=True)
                os.close(fd)
                _available = True
            except (OSError, AttributeError):
                _syscall = None  # ENOSYS, or a seccomp profile that refuses it: walk instead
        return _available


def _openat2(dir_fd: int, path: str, flags: int, mode: int, *, close_dir: bool = False) -> int:
    how = _OpenHow(flags=flags, mode=mode, resolve=_RESOLVE)
    try:
        assert _syscall is not None
        fd = int(_syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how)))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd
    finally:
        if close_dir:
            os.close(dir_fd)


def active_resolver() -> Resolver:
    """Return how paths are resolved now: `openat2` where the kernel has it, else `walk`."""
    if _forced:
        return _forced[-1]
    if os.environ.get(_RESOLVER_ENV) == "walk":
        return "walk"
    return "openat2" if _openat2_works() else "walk"


@contextlib.contextmanager
def using_resolver(resolver: Resolver) -> Iterator[None]:
    """Resolve with `resolver` inside the block (tests cover both; `openat2` needs a kernel that has it)."""
    if resolver == "openat2" and not _openat2_works():
        raise OSError(errno.ENOSYS, "openat2 is not available on this kernel")
    _forced.append(resolver)
    try:
        yield
    finally:
        _forced.pop()


def _parts(relative: str) -> list[str]:
    """Split `relative` into plain names; absolute paths, NUL and `..` are refused before any call."""
    if os.path.isabs(relative) or "\x00" in relative or ".." in relative.replace("\\", "/").split("/"):
        raise UnsafeEntry(relative, "leads outside the workspace")
    return [part for part in relative.split("/") if part not in ("", ".")]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One directory entry as listed (links never followed): its name and what it is."""

    name: str
    kind: Literal["file", "dir", "link", "other"]
    size: int
    mtime: float


class WorkspaceDir:
    """A workspace root held open; every method resolves beneath it and follows no link.

    Paths are relative to the root (`uploads/2026-01-01/a.pdf`). A symbolic link anywhere on
    the way, `..`, or an absolute path is `UnsafeEntry`; a missing entry is the `OSError` the
    kernel gave (`FileNotFoundError`, ...). Use as a context manager; `close` releases the fd.
    """

    __slots__ = ("_fd", "root")

    def __init__(self, *, fd: int, root: Path) -> None:
        self._fd = fd
        self.root = root

    @classmethod
    def open(cls, root: Path) -> WorkspaceDir:
        """Open the workspace `root` (resolved and trusted: the seam made it); raises `OSError`."""
        return cls(fd=os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), root=root)

    def __enter__(self) -> WorkspaceDir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the root's descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def open_read(self, relative: str) -> io.BufferedReader:
        """Open a regular file with one link for reading; raises `UnsafeEntry` for anything else."""
        fd = self._resolve(relative, _parts(relative), _READ)
        _check(fd, relative)
        return open(fd, "rb", closefd=True)

    def create(self, relative: str, *, mode: int = 0o644, readable: bool = False) -> BinaryIO:
        """Create a new file (`O_EXCL`: an entry of that name, a link included, is `FileExistsError`).

        `readable`: open it for reading too (`w+b`), so what was written can be read back
        from this descriptor instead of opening the path again.
        """
        parent, name = self._parent(relative)
        flags = (_CREATE & ~os.O_WRONLY) | os.O_RDWR if readable else _CREATE
        try:
            fd = _translate(relative, lambda: os.open(name, flags, mode, dir_fd=parent))
        finally:
            os.close(parent)
        return open(fd, "w+b" if readable else "wb", closefd=True)

    def open_write(self, relative: str, *, mode: int = 0o644) -> BinaryIO:
        """Open a file to replace its content (created if missing), checked before it is truncated."""
        fd = self._resolve(relative, _parts(relative), _REPLACE, mode)
        _check(fd, relative)
        handle = open(fd, "wb", closefd=True)
        os.set_blocking(fd, True)
        handle.truncate(0)
        return handle

    def make_dirs(self, relative: str, *, mode: int = 0o755) -> None:
        """Create `relative` and its missing parents, each beneath the one before (a link on the way is refused)."""
        current = os.dup(self._fd)
        try:
            for part in _parts(relative):
                try:
                    os.mkdir(part, mode, dir_fd=current)
                except FileExistsError:
                    pass  # an existing entry: opened below without following it
                step = _step(relative, part, current)
                os.close(current)
                current = step
        finally:
            os.close(current)

    def move(self, source: str, target: str) -> None:
        """Move `source` to `target` (an entry there is replaced, never followed); both beneath the root."""
        src_dir, src_name = self._parent(source)
        try:
            dst_dir, dst_name = self._parent(target)
            try:
                os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
            finally:
                os.close(dst_dir)
        finally:
            os.close(src_dir)

    def delete(self, relative: str, *, missing_ok: bool = False) -> None:
        """Remove the entry itself (a link is removed, not what it points at)."""
        try:
            parent, name = self._parent(relative)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            if not missing_ok:
                raise
        finally:
            os.close(parent)

    def remove_tree(self, relative: str) -> None:
        """Remove a folder and everything in it, following no link (a link is removed as an entry)."""
        try:
            parent, name = self._parent(relative)
        except FileNotFoundError:
            return
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                # shutil.rmtree with dir_fd walks by descriptor and checks each folder it enters
                # is the one it listed, so a link swapped in is never entered.
                shutil.rmtree(name, dir_fd=parent)
            else:
                os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            os.close(parent)

    def entries(self, relative: str = ".") -> list[Entry]:
        """List a folder (unsorted), each entry's type and size read without following links."""
        fd = self._resolve(relative, _parts(relative), _DIR)
        found: list[Entry] = []
        try:
            with os.scandir(fd) as listing:
                for item in listing:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone since it was listed
                    found.append(Entry(name=item.name, kind=_kind(info.st_mode), size=info.st_size, mtime=info.st_mtime))
        finally:
            os.close(fd)
        return found

    def lstat(self, relative: str) -> os.stat_result:
        """Return the entry's own status (a link is not followed); raises `OSError` when it is missing."""
        parent, name = self._parent(relative)
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def exists(self, relative: str) -> bool:
        """Return whether an entry (a link included) is at `relative`."""
        try:
            self.lstat(relative)
        except FileNotFoundError:
            return False
        return True

    def _parent(self, relative: str) -> tuple[int, str]:
        """Open the folder holding `relative`'s last name; return its descriptor and that name."""
        parts = _parts(relative)
        if not parts:
            raise UnsafeEntry(relative, "is the workspace itself")
        return self._resolve(relative, parts[:-1], _DIR), parts[-1]

    def _resolve(self, relative: str, parts: list[str], flags: int, mode: int = 0) -> int:
        if self._fd < 0:
            raise ValueError("the workspace directory is closed")
        if active_resolver() == "openat2":
            # RESOLVE_NO_SYMLINKS refuses a link on every component, the last included (ELOOP)
            return _translate(relative, lambda: _openat2(self._fd, "/".join(parts) or ".", flags & ~os.O_NOFOLLOW, mode))
        if not parts:
            return os.open(".", flags & ~os.O_NOFOLLOW, mode, dir_fd=self._fd)
        current = self._fd
        try:
            for part in parts[:-1]:
                step = _step(relative, part, current)
                if current != self._fd:
                    os.close(current)
                current = step
            last = parts[-1]
            try:
                return _translate(relative, lambda: os.open(last, flags | os.O_NOFOLLOW, mode, dir_fd=current))
            except NotADirectoryError:  # O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR
                _refuse_a_link(relative, last, current)
                raise
        finally:
            if current != self._fd:
                os.close(current)


def _step(relative: str, part: str, dir_fd: int) -> int:
    """Open one folder beneath `dir_fd` by a path-only descriptor, refusing a link (O_PATH reports it as ENOTDIR)."""
    try:
        return os.open(part, _STEP, dir_fd=dir_fd)
    except NotADirectoryError:
        _refuse_a_link(relative, part, dir_fd)
        raise  # a file where a folder should be: an ordinary error, not an attack


def _refuse_a_link(relative: str, part: str, dir_fd: int) -> None:
    """Raise `UnsafeEntry` if `part` beneath `dir_fd` is a symbolic link."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise UnsafeEntry(relative, "goes through a symbolic link") from None


def _translate(relative: str, call: Callable[[], int]) -> int:
    try:
        return call()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntry(relative, "goes through a symbolic link") from None
        if exc.errno == errno.EXDEV:
            raise UnsafeEntry(relative, "leads outside the workspace") from None
        raise


def _check(fd: int, relative: str) -> None:
    """Check the opened descriptor (a regular file, one link); closes it when refused."""
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UnsafeEntry(relative, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeEntry(relative, "is not a regular file")
        # A hard link planted in the workspace (`ln /elsewhere/secret x`) names a file outside:
        # no path check can see that, the link count can.
        if info.st_nlink != 1:
            raise UnsafeEntry(relative, f"has {info.st_nlink} hard links (it may be a file outside the workspace)")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> Literal["file", "dir", "link", "other"]:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "link" if stat.S_ISLNK(mode) else "other"


def copy_file(
    source: BinaryIO, target: BinaryIO, *, max_bytes: int, too_large: Callable[[int, int], Exception]
) -> int:
    """Copy the open file `source` (from its start) into the open file `target`; return the bytes copied.

    Descriptor to descriptor (`copy_file_range`, in the kernel), no path opened; raises
    `too_large(size, max_bytes)` before copying a file over `max_bytes`.
    """
    size = os.fstat(source.fileno()).st_size
    if size > max_bytes:
        raise too_large(size, max_bytes)
    target.flush()
    offset = 0
    while offset < size:
        try:
            copied = os.copy_file_range(source.fileno(), target.fileno(), size - offset, offset)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            # another filesystem (before Linux 5.19) or none of it: the same copy through memory
            copied = len(chunk := os.pread(source.fileno(), min(size - offset, _COPY_CHUNK), offset))
            target.write(chunk)
            target.flush()
        if copied == 0:
            break  # the source shrank meanwhile
        offset += copied
    return offset


def reopen_read_only(fd: int) -> int:
    """Return a new read-only descriptor of the file open at `fd`, at offset 0 (the caller closes it).

    It is reopened through the open file itself (`/proc/self/fd`), never through its
    workspace path, so nothing put at that path since can be what is read; what it is given
    to (a parser child) cannot write the file.
    """
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


class WorkspaceUsage:
    """What one workspace holds, for `workspace_max_bytes`, without a walk per write.

    The total is measured by a walk that follows no link and stops once it passes the limit
    (bigger is all a check needs to know), then reused for `USAGE_TTL_S`; the daemon's own
    writes in between are added as they happen (`add`), so a burst of uploads cannot pass the
    limit between two measurements. Thread-safe.
    """

    __slots__ = ("_lock", "_measured_at", "_total", "root")

    def __init__(self, *, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._total = 0
        self._measured_at: float | None = None

    def room(self, limit: int | None) -> int | None:
        """Return how many bytes may still be written (None: no limit); 0 or less means full."""
        if limit is None:
            return None
        with self._lock:
            now = time.monotonic()
            if self._measured_at is None or now - self._measured_at >= USAGE_TTL_S:
                self._total = _measure(self.root, stop_after=limit)
                self._measured_at = now
            return limit - self._total

    def measure(self, limit: int) -> int:
        """Measure now (what a command wrote counts at once) and return the total, exact up to past `limit`."""
        with self._lock:
            self._total = _measure(self.root, stop_after=limit)
            self._measured_at = time.monotonic()
            return self._total

    def require(self, limit: int | None, size: int) -> None:
        """Raise `WorkspaceFull` unless `size` more bytes fit under `limit`."""
        room = self.room(limit)
        if room is not None and limit is not None and size > room:
            raise WorkspaceFull(str(self.root), limit - room, limit)

    def add(self, size: int) -> None:
        """Count `size` bytes the daemon just wrote (negative: freed)."""
        with self._lock:
            self._total = max(0, self._total + size)


_USAGE: dict[Path, WorkspaceUsage] = {}
_USAGE_LOCK: Final = threading.Lock()


def workspace_usage(root: Path) -> WorkspaceUsage:
    """Return the one `WorkspaceUsage` of the workspace at `root` in this process."""
    with _USAGE_LOCK:
        usage = _USAGE.get(root)
        if usage is None:
            usage = _USAGE[root] = WorkspaceUsage(root=root)
        return usage


def _measure(root: Path, *, stop_after: int) -> int:
    """Return the bytes on disk under `root` (links not followed), stopping once past `stop_after`."""
    total = 0
    try:
        for _, _, files, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in files:
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                # blocks, not st_size: a sparse file claims what it does not hold
                total += info.st_blocks * 512 if stat.S_ISREG(info.st_mode) else 0
            if total > stop_after:
                break
    except OSError:
        pass  # an unreadable corner counts as empty; the check is a bound, not an audit
    return total


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
