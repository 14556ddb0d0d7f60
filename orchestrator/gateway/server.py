"""open_gateway(): run the HTTP API inside a Runtime for as long as the context is open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from loguru import logger

from orchestrator.config import is_loopback, token_problem
from orchestrator.errors import OrchestratorError
from orchestrator.gateway.app import build_app
from orchestrator.gateway.idempotency import IdempotencyStore
from orchestrator.gateway.state import GatewayHost, GatewayState

__all__ = ["GatewayAddress", "GatewayError", "open_gateway"]

# Turns were drained by the daemon before the gateway closes; this only bounds stragglers.
_SHUTDOWN_TIMEOUT_S: Final = 2.0


class GatewayError(OrchestratorError):
    """The gateway cannot start (unsafe address, port in use, unreadable token)."""

    def __init__(self, listen: str, port: int, reason: str) -> None:
        self.listen, self.port, self.reason = listen, port, reason
        super().__init__(f"gateway on {listen}:{port}: {reason}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayAddress:
    """Where a running gateway listens (the real port when the config says 0)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """Return the base URL, e.g. `http://127.0.0.1:8080`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@asynccontextmanager
async def open_gateway(host: GatewayHost) -> AsyncIterator[GatewayAddress | None]:
    """Serve `[gateway]` while the context is open; yield None when it is not configured.

    Raises `GatewayError` when it would listen on a non-loopback address without a token
    (the config check refuses that too), when the token cannot be read, or when the
    port cannot be bound. The gateway keeps the settings it started with until restart.
    """
    settings = host.config.gateway
    if settings is None:
        yield None
        return
    if settings.token is None and not is_loopback(settings.listen):
        raise GatewayError(settings.listen, settings.port, "refusing a non-loopback address without gateway.token")
    try:
        token = host.secret(settings.token) if settings.token is not None else None
    except OrchestratorError as exc:
        raise GatewayError(settings.listen, settings.port, str(exc)) from None
    short = token_problem(token) if token is not None else None
    if short:
        raise GatewayError(settings.listen, settings.port, f"gateway.token: {short}")
    try:
        scrape = host.secret(settings.metrics_token) if settings.metrics_token is not None else None
    except OrchestratorError as exc:
        raise GatewayError(settings.listen, settings.port, str(exc)) from None
    short = token_problem(scrape) if scrape is not None else None
    if short:
        raise GatewayError(settings.listen, settings.port, f"gateway.metrics_token: {short}")
    path = host.config.state_path() / "gateway.sqlite3"
    with IdempotencyStore(path, ttl_s=settings.idempotency_ttl_s) as idempotency:
        state = GatewayState(
            host=host, token=token, idempotency=idempotency, metrics_token=scrape,
            max_body_bytes=settings.max_body_bytes,
        )
        app = build_app(state, max_body_bytes=settings.max_body_bytes)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        try:
            try:
                await web.TCPSite(runner, settings.listen, settings.port).start()
            except OSError as exc:
                raise GatewayError(settings.listen, settings.port, exc.strerror or str(exc)) from None
            bound, port = runner.addresses[0][:2]
            address = GatewayAddress(host=str(bound), port=int(port))
            logger.info("gateway listening on {}{}", address.url, "" if token else " (no token: loopback only)")
            yield address
        finally:
            await runner.cleanup()
