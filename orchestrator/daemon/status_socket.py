"""The status socket: `orchestrator status` asks the running daemon for its status document.

A unix stream socket, `run/status.sock` in the state dir: the folder 0700 and the socket
0600, so only the daemon's own user reaches it. The exchange is one line each way: the
client sends `status`, the daemon answers the document as one JSON line and closes. The
request is bounded (`_MAX_REQUEST` bytes, `_REQUEST_TIMEOUT_S`), and connections are
answered one at a time by one task in the runtime's TaskGroup.

Served with `asyncio` sockets rather than aiohttp's `UnixSite`: aiohttp is imported only
when `[gateway]` is configured, and one line needs no HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from loguru import logger

from orchestrator.daemon.runtime import Runtime
from orchestrator.errors import OrchestratorError
from orchestrator.private import private_dir

__all__ = ["DaemonNotRunning", "ask_status", "serve_status_socket", "status_socket_path"]

_REQUEST: Final = b"status\n"
_MAX_REQUEST: Final = 64
_REQUEST_TIMEOUT_S: Final = 2.0
_MAX_ANSWER: Final = 4 * 1024 * 1024
_SUN_PATH_MAX: Final = 107  # sockaddr_un.sun_path holds 108 bytes with the final NUL


class DaemonNotRunning(OrchestratorError):
    """No daemon answers on the status socket (it is missing, refused or silent)."""

    def __init__(self, *, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"no daemon is running for this state dir ({path}: {reason})")


def status_socket_path(state_dir: Path) -> Path:
    """Return where the daemon serving `state_dir` listens for `orchestrator status`."""
    return state_dir / "run" / "status.sock"


@asynccontextmanager
async def serve_status_socket(runtime: Runtime) -> AsyncIterator[Path]:
    """Answer status requests on the state dir's socket while the context is open.

    Any socket file already there is a previous daemon's (the caller holds the state
    lock): it is replaced. The socket file is removed on exit.
    """
    path = status_socket_path(runtime.config.state_path())
    private_dir(path.parent)
    os.chmod(path.parent, 0o700)  # ours alone: a folder left wider by hand is closed again
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _addressable(path) as address:
            listener.bind(address)
        os.chmod(path, 0o600)  # unreachable meanwhile: the folder is 0700
        listener.listen(16)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    task = runtime.spawn(_answer_each(runtime, listener), name="status-socket")
    try:
        yield path
    finally:
        task.cancel()
        await asyncio.wait([task])
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def _answer_each(runtime: Runtime, listener: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    while True:
        connection, _ = await loop.sock_accept(listener)
        with connection:
            connection.setblocking(False)
            try:
                async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                    await _answer(runtime, connection, loop)
            except (TimeoutError, OSError) as exc:
                logger.debug("status socket: a request was dropped ({})", type(exc).__name__)
            except Exception as exc:  # one bad answer must not end the socket
                logger.opt(exception=exc).warning("status socket: the status document could not be built")


async def _answer(runtime: Runtime, connection: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    request = b""
    while b"\n" not in request and len(request) <= _MAX_REQUEST:
        chunk = await loop.sock_recv(connection, _MAX_REQUEST + 1)
        if not chunk:
            break
        request += chunk
    if request != _REQUEST:
        answer: dict[str, Any] = {"error": "bad_request", "detail": "send one line: status"}
    else:
        answer = runtime.status_document()
    await loop.sock_sendall(connection, json.dumps(answer).encode() + b"\n")


def ask_status(state_dir: Path, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """Return the status document of the daemon serving `state_dir`.

    Raises `DaemonNotRunning` when the socket is missing, refuses the connection or does
    not answer within `timeout_s`.
    """
    path = status_socket_path(state_dir)
    if not path.exists():
        raise DaemonNotRunning(path=path, reason="no socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        try:
            with _addressable(path) as address:
                client.connect(address)
            client.sendall(_REQUEST)
            answer = _read_line(client)
        except ConnectionRefusedError:
            raise DaemonNotRunning(path=path, reason="connection refused: the daemon is gone") from None
        except TimeoutError:
            raise DaemonNotRunning(path=path, reason=f"no answer within {timeout_s:g}s") from None
        except PermissionError:
            raise DaemonNotRunning(path=path, reason="permission denied: run as the daemon's user") from None
        except OSError as exc:
            raise DaemonNotRunning(path=path, reason=exc.strerror or str(exc)) from None
    try:
        document = json.loads(answer)
    except ValueError:
        raise DaemonNotRunning(path=path, reason="the answer was not a status document") from None
    if not isinstance(document, dict) or "schema" not in document:
        raise DaemonNotRunning(path=path, reason="the answer was not a status document")
    return document


def _read_line(client: socket.socket) -> bytes:
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = client.recv(65536)
        if not chunk:
            break
        answer += chunk
        if len(answer) > _MAX_ANSWER:
            break
    return answer


@contextlib.contextmanager
def _addressable(path: Path) -> Iterator[str]:
    """Yield an address for `path` that fits `sun_path`: itself, or through its folder's descriptor."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)
