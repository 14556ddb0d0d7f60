"""Config model for `[gateway]` (the HTTP API) and its loopback-without-token check."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.secrets import SecretRef
from orchestrator.errors import ConfigProblem

__all__ = ["GatewayConfig", "check_gateway", "is_loopback"]

NonEmptyStr = Annotated[str, Field(min_length=1)]


class GatewayConfig(BaseModel):
    """The HTTP API: where it listens, its bearer token, and its request limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    listen: NonEmptyStr = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)  # 0 = any free port (tests)
    token: SecretRef | None = None
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    idempotency_ttl_s: float = Field(default=86_400.0, gt=0)


def is_loopback(host: str) -> bool:
    """Return whether `host` is a loopback address (or `localhost`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def check_gateway(gateway: GatewayConfig | None, *, shown: str) -> Iterator[ConfigProblem]:
    """Refuse a gateway reachable from other hosts without a token."""
    if gateway is not None and gateway.token is None and not is_loopback(gateway.listen):
        yield ConfigProblem(
            shown,
            "gateway.listen",
            f"{gateway.listen!r} is not a loopback address: set gateway.token (a secret reference) "
            "or listen on 127.0.0.1",
        )
