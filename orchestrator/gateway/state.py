"""What the gateway's handlers share: the host daemon (as a protocol), the token, the error shape."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aiohttp import web

from orchestrator.config import SecretRef
from orchestrator.gateway.idempotency import IdempotencyStore
from orchestrator.lifecycle import Lifecycle
from orchestrator.observability import Observability
from orchestrator.sessions import TurnHost

__all__ = ["GATEWAY", "ChannelHealth", "GatewayHost", "GatewayState", "json_error"]


class ChannelHealth(Protocol):
    """One channel as `/health` reports it."""

    @property
    def kind(self) -> str: ...

    @property
    def state(self) -> Lifecycle: ...

    @property
    def ready(self) -> bool: ...

    @property
    def error(self) -> str | None: ...


class ChannelHealthSource(Protocol):
    """The host's channels, as far as `/health` needs them."""

    def status(self) -> Mapping[str, ChannelHealth]: ...


class GatewayHost(TurnHost, Protocol):
    """What the gateway needs of the daemon it runs in (the daemon's `Runtime` is one)."""

    @property
    def channels(self) -> ChannelHealthSource: ...

    @property
    def observability(self) -> Observability: ...

    def secret(self, ref: SecretRef) -> str: ...

    def status_document(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayState:
    """What every handler needs: the host, the resolved tokens and the idempotency store."""

    host: GatewayHost
    token: str | None
    idempotency: IdempotencyStore
    metrics_token: str | None = None  # `gateway.metrics_token`: may read /metrics only
    max_body_bytes: int = 1_048_576  # `gateway.max_body_bytes`: a JSON body, or one form field


GATEWAY: Final = web.AppKey("gateway", GatewayState)


def json_error(status: int, error: str, detail: str, **extra: object) -> web.Response:
    """Return the gateway's one error shape: `{"error": code, "detail": text}`."""
    return web.json_response({"error": error, "detail": detail, **extra}, status=status)
