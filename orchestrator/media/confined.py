"""Uploaded bytes parsed in a confined child: started ahead, limited, killed at its deadline.

The child (`pdf_child.py`, run as `python -I -S -B -c <its source>`) starts under the
sandbox the seam chose (`ParserLimits.sandbox`, through `tools.launch` with the network
off), with RLIMIT_CPU, RLIMIT_AS and RLIMIT_FSIZE 0, an empty scratch folder as its only
writable place, and read access to the system folders, the interpreter's prefix and the
site-packages pypdf is in (no workspace, no state). It gets the document as an open
read-only descriptor over its stdin socket (SCM_RIGHTS) and answers on its stdout pipe.
A spare is started for the next document once one is done, so a document waits neither
for the interpreter nor for pypdf's import (about 100 ms). The child is
killed at the wall-clock deadline, when the awaiting task is cancelled (`/stop`, the
daemon's shutdown), and past the output cap; a spare ends by itself when the daemon's end
of its socket closes (the daemon exited), and at the daemon's exit (`atexit`).
"""

from __future__ import annotations

import array
import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from loguru import logger

from orchestrator.errors import OrchestratorError
from orchestrator.media.policy import ParserLimits
from orchestrator.policy import SandboxKind, SandboxLimits
from orchestrator.tools import launch

__all__ = ["ParserFailed", "ParserOverLimit", "close_spares", "run_pdf_child"]

_CHILD_ENV: Final = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
# pypdf's import is not the document's: the spare spends it before any document arrives.
_IMPORT_CPU_S: Final = 2
_UNREADABLE: Final = 3
_OUT_OF_MEMORY: Final = 4
_SYSTEM_DIRS: Final = ("/usr/", "/bin/", "/lib/", "/lib64/")


class ParserOverLimit(OrchestratorError):
    """The parser child ran past a limit (`what`: "time", "cpu" or "memory") and was killed."""

    def __init__(self, *, what: str, limits: ParserLimits) -> None:
        self.what = what
        self.limits = limits
        super().__init__(f"the PDF parser ran past its {what} limit ({limits.describe_limit(what)})")


class ParserFailed(OrchestratorError):
    """The parser child could not be started or talked to."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the PDF parser could not run: {reason}")


@dataclass(slots=True, kw_only=True, eq=False)
class _Child:
    process: subprocess.Popen[bytes]
    control: socket.socket
    stdout: int

    def close(self) -> None:
        # The child leads its own process group, and everything it started stays in it (the
        # sandboxes refuse setsid): the whole group is killed, so bwrap's inner init and the
        # parser go with bwrap even when its --die-with-parent does not fire.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        _live.discard(self)
        self.control.close()
        with contextlib.suppress(OSError):
            os.close(self.stdout)


_Key = tuple[SandboxKind, int, int]
_spares: dict[_Key, _Child] = {}
_live: set[_Child] = set()  # every child not yet closed: spares and parses under way


@cache
def _child_source() -> str:
    return Path(__file__).with_name("pdf_child.py").read_text(encoding="utf-8")


@cache
def _pypdf_home() -> str:
    import pypdf

    return str(Path(pypdf.__file__).resolve().parents[1])


@cache
def _scratch() -> Path:
    # The child's cwd and only writable folder: empty, private, removed at exit.
    path = Path(tempfile.mkdtemp(prefix="orchestrator-parser-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def _readable() -> tuple[str, ...]:
    # The interpreter with its standard library, and pypdf's site-packages: nothing else.
    wanted = (os.path.realpath(sys.base_prefix), _pypdf_home())
    return tuple(path for path in wanted if not (path + "/").startswith(_SYSTEM_DIRS))


def _spawn(key: _Key, *, source: str, args: Sequence[str]) -> _Child:
    """Start `python -I -S -B -c source *args` confined as `key` says, its stdin a socket."""
    kind, cpu_seconds, memory_bytes = key
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    argv = (
        os.path.realpath(sys.executable), "-I", "-S", "-B", "-c", source,
        *args, f"orchestrator-pdf-child:{cpu_seconds}s:{memory_bytes}",
    )
    limits = SandboxLimits(
        cpu_seconds=cpu_seconds + _IMPORT_CPU_S, address_space_bytes=memory_bytes, file_size_bytes=0
    )
    try:
        with launch(
            kind, argv, workspace=_scratch(), network=False, env=_CHILD_ENV, limits=limits,
            read_only=_readable(),
        ) as how:
            process = subprocess.Popen(
                how.argv, cwd=how.cwd, env=dict(how.env), preexec_fn=how.preexec, pass_fds=how.pass_fds,
                stdin=theirs.fileno(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
    except (OSError, OrchestratorError) as exc:
        ours.close()
        raise ParserFailed(str(exc)) from exc
    finally:
        theirs.close()
    assert process.stdout is not None
    stdout = os.dup(process.stdout.fileno())
    process.stdout.close()
    os.set_blocking(stdout, False)
    child = _Child(process=process, control=ours, stdout=stdout)
    _live.add(child)
    return child


def _spawn_pdf(key: _Key, *, max_pages: int, max_chars: int) -> _Child:
    return _spawn(key, source=_child_source(), args=(_pypdf_home(), str(max_pages), str(max_chars)))


def _key(limits: ParserLimits) -> _Key:
    return (limits.sandbox, limits.cpu_seconds, limits.memory_bytes)


def _take(limits: ParserLimits, *, max_pages: int, max_chars: int) -> _Child:
    child = _spares.pop(_key(limits), None)
    if child is not None and child.process.poll() is None:
        return child
    if child is not None:
        child.close()
    return _spawn_pdf(_key(limits), max_pages=max_pages, max_chars=max_chars)


def _replenish(limits: ParserLimits, max_pages: int, max_chars: int) -> None:
    # Started once a document is done (not while it parses, on a small host's few cores).
    key = _key(limits)
    if key in _spares:
        return
    try:
        _spares[key] = _spawn_pdf(key, max_pages=max_pages, max_chars=max_chars)
    except ParserFailed as exc:
        logger.warning("no spare PDF parser: {}", exc)


def close_spares() -> None:
    """End every waiting spare parser, and at exit every parse still under way."""
    while _spares:
        _, child = _spares.popitem()
        child.close()


def _close_all() -> None:
    close_spares()
    for child in list(_live):
        child.close()


atexit.register(_close_all)


async def _read_until_eof(fd: int, cap: int) -> tuple[bytes, bool]:
    """Return what `fd` gave until EOF, or its first `cap` bytes and True once it passed them."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()
    chunks: list[bytes] = []
    size = 0

    def readable() -> None:
        nonlocal size
        if done.done():
            return
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            done.set_exception(exc)
            return
        chunks.append(data)
        size += len(data)
        if not data or size > cap:
            done.set_result(size > cap)

    loop.add_reader(fd, readable)
    try:
        over = await done
    finally:
        loop.remove_reader(fd)
    return b"".join(chunks)[:cap], over


async def _exit_code(process: subprocess.Popen[bytes]) -> int:
    loop = asyncio.get_running_loop()
    pidfd = os.pidfd_open(process.pid)
    try:
        ended: asyncio.Future[None] = loop.create_future()
        def exited() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(pidfd, exited)
        try:
            await ended
        finally:
            loop.remove_reader(pidfd)
    finally:
        os.close(pidfd)
    return process.wait()


def _killed_by(code: int) -> int | None:
    # Popen reports a signal as -N; bwrap, whose child it was, exits 128+N.
    if code < 0:
        return -code
    return code - 128 if code > 128 else None


async def run_pdf_child(fd: int, limits: ParserLimits, *, max_pages: int, max_chars: int) -> bytes | None:
    """Return the child's text for the PDF open at `fd` (at most `4 * max_chars` bytes), None if unreadable.

    `fd` stays the caller's. Raises `ParserOverLimit` (the child killed: time, CPU or memory)
    and `ParserFailed`; cancellation kills the child and propagates.
    """
    cap = 4 * max_chars + 64 * max_pages
    child = _take(limits, max_pages=max_pages, max_chars=max_chars)
    cancelled = False
    try:
        async with asyncio.timeout(limits.timeout_s):
            try:
                child.control.sendmsg([b"d"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            except OSError as exc:
                raise ParserFailed(f"the child ended before its document arrived ({exc})") from exc
            logger.info("reading a PDF in parser child {} ({}, {})", child.process.pid, limits.sandbox,
                        ", ".join(limits.describe()[1:]))
            text, over = await _read_until_eof(child.stdout, cap)
            if over:
                logger.info("the PDF parser wrote more than {} bytes; its text is cut there", cap)
                code = 0
            else:
                code = await _exit_code(child.process)
    except TimeoutError as exc:
        logger.info("PDF parser {} killed at its {} s deadline", child.process.pid, limits.timeout_s)
        raise ParserOverLimit(what="time", limits=limits) from exc
    except asyncio.CancelledError:
        logger.info("PDF parser {} killed: its turn was cancelled", child.process.pid)
        cancelled = True  # no spare then: a cancel is often the daemon stopping
        raise
    finally:
        child.close()
        if not cancelled:  # after this document's answer, not before it
            asyncio.get_running_loop().call_soon(_replenish, limits, max_pages, max_chars)
    if code == 0:
        return text
    if code == _OUT_OF_MEMORY:
        raise ParserOverLimit(what="memory", limits=limits)
    if _killed_by(code) in (signal.SIGXCPU, signal.SIGKILL):
        raise ParserOverLimit(what="cpu", limits=limits)
    if code != _UNREADABLE:
        logger.info("the PDF parser exited with code {}", code)
    return None
