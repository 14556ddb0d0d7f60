"""Open the client transport for one `[mcp.servers.X]`, resolving secret references at connect time.

`env` and `headers` values that are references (`env:NAME`, `file:PATH`) are resolved
here, when the connection is made, never at config load; any other value is passed
literally (config validation rejects literals for names that look like secrets).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, TextIO

from orchestrator.config import McpServerConfig, SecretRef, resolve_secret

if TYPE_CHECKING:
    from mcp.client import Transport
    from mcp.client._transport import ReadStream, TransportStreams
    from mcp.shared.message import SessionMessage

__all__ = ["open_transport", "resolve_value"]

_REFERENCE_SCHEMES: Final = ("env", "file")
# The SDK's defaults: a server may hold a response stream open for a long time.
_HTTP_TIMEOUT_S: Final = 30.0
_HTTP_READ_TIMEOUT_S: Final = 300.0
_SESSION_HEADER: Final = "mcp-session-id"


def resolve_value(value: str, *, base: Path | None) -> str:
    """Return `value`, or the secret it references when it is `env:NAME` / `file:PATH`."""
    scheme, sep, target = value.partition(":")
    if sep and scheme in _REFERENCE_SCHEMES and target:
        return resolve_secret(SecretRef(value), base=base)
    return value


def open_transport(
    config: McpServerConfig,
    *,
    base: Path | None,
    on_lost: Callable[[], None],
    on_session_lost: Callable[[], None] = lambda: None,
) -> Transport:
    """Return the transport for `config`; `on_lost` is called once the server's stream ends.

    Over HTTP, `on_session_lost` is called when the server answers a request that names a
    session with 404 (the spec's "session not found") or with a 400 whose body speaks of
    the session (what some servers send instead); the SDK reports either as a plain error.

    Raises `SecretError` (on entering) when a referenced secret is missing, and `OSError`
    when a stdio server cannot be spawned.
    """
    return _transport(config, base=base, on_lost=on_lost, on_session_lost=on_session_lost)


@asynccontextmanager
async def _transport(
    config: McpServerConfig, *, base: Path | None, on_lost: Callable[[], None], on_session_lost: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    async with AsyncExitStack() as stack:
        if config.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert config.command is not None  # config validation requires it for stdio
            env = _resolved(config.env, base)
            cwd = _cwd(config.cwd, base)
            command, args = _dies_with_us(config.command, list(config.args), env=env, cwd=cwd)
            params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
            streams = await stack.enter_async_context(stdio_client(params, errlog=_errlog()))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert config.url is not None  # config validation requires it for http

            async def watch_session(response: httpx2.Response) -> None:
                if response.status_code not in (400, 404) or _SESSION_HEADER not in response.request.headers:
                    return
                if response.status_code == 400:
                    await response.aread()  # kept on the response: the SDK reads it again
                    if b"session" not in response.content.lower():
                        return  # an ordinary bad request, not a forgotten session
                on_session_lost()

            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=_resolved(config.headers, base),
                    timeout=httpx2.Timeout(_HTTP_TIMEOUT_S, read=_HTTP_READ_TIMEOUT_S),
                    event_hooks={"response": [watch_session]},
                )
            )
            streams = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
        read, write = streams
        yield _WatchedReadStream(read, on_lost), write


def _dies_with_us(command: str, args: list[str], *, env: Mapping[str, str], cwd: Path | None) -> tuple[str, list[str]]:
    """Run the server under `setpriv --pdeathsig KILL`, so a daemon killed with SIGKILL
    (or crashing) never leaves a server behind, a blocked call and all.

    The command is resolved here first: a missing one stays a `FileNotFoundError` (a
    permanent fault, reported once) instead of a wrapper that exits 127. Without `setpriv`
    (util-linux) the server is started directly.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None or not sys.platform.startswith("linux"):
        return command, args
    search = env.get("PATH", os.environ.get("PATH", os.defpath))
    if os.sep in command:
        found = str(Path(cwd or Path.cwd(), command)) if not os.path.isabs(command) else command
        if not os.access(found, os.X_OK):
            raise FileNotFoundError(2, "No such file or directory", command)
    else:
        located = shutil.which(command, path=search)
        if located is None:
            raise FileNotFoundError(2, "No such file or directory", command)
        found = located
    return setpriv, ["--pdeathsig", "KILL", "--", found, *args]


def _resolved(values: Mapping[str, str], base: Path | None) -> dict[str, str]:
    return {key: resolve_value(value, base=base) for key, value in values.items()}


def _cwd(cwd: str | None, base: Path | None) -> Path | None:
    if cwd is None:
        return None
    path = Path(cwd).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _errlog() -> TextIO:
    # The server's stderr goes to the daemon's own stderr (fd 2, the journal under
    # systemd), even while something has swapped sys.stderr for an in-memory buffer.
    return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr


class _WatchedReadStream:
    """The server-to-client stream, reporting when it ends (a stdio server exiting)."""

    __slots__ = ("_inner", "_on_lost")

    def __init__(self, inner: ReadStream[SessionMessage | Exception], on_lost: Callable[[], None]) -> None:
        self._inner = inner
        self._on_lost = on_lost

    @property
    def last_context(self) -> object:
        # The SDK's dispatcher reads the sender's context from its stream, when present.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_lost()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
