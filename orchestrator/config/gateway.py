"""Config model for `[gateway]` (the HTTP API) and its loopback-without-token check."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.secrets import SecretRef, resolve_secret
from orchestrator.errors import ConfigProblem, EmptySecret, SecretError

__all__ = ["MIN_TOKEN_CHARS", "GatewayConfig", "check_gateway", "gateway_token_problems", "is_loopback", "token_problem"]

# A bearer token anyone on the network may guess at: 32 characters is `openssl rand -hex 16`.
MIN_TOKEN_CHARS: Final = 32

NonEmptyStr = Annotated[str, Field(min_length=1)]


class GatewayConfig(BaseModel):
    """The HTTP API: where it listens, its bearer token, and its request limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    listen: NonEmptyStr = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535, strict=True)  # 0 = any free port (tests)
    token: SecretRef | None = None
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576, strict=True)
    idempotency_ttl_s: float = Field(default=86_400.0, gt=0, strict=True)
    # GET /metrics (Prometheus); off: no endpoint and nothing observes the turns
    metrics: bool = Field(default=False, strict=True)
    # a scrape-only bearer token for /metrics (the gateway token works there too)
    metrics_token: SecretRef | None = None


def is_loopback(host: str) -> bool:
    """Return whether `host` is a loopback address (or `localhost`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def check_gateway(
    gateway: GatewayConfig | None, *, shown: str, base: Path | None = None
) -> Iterator[ConfigProblem]:
    """Refuse a gateway reachable from other hosts without a token, and a blank or short token.

    The token is read here when it can be (a `file:` next to the config, an `env:` set in
    this environment); one that cannot be read yet is checked by the daemon before it starts
    (`gateway_token_problems`).
    """
    if gateway is None:
        return
    if gateway.token is None and not is_loopback(gateway.listen):
        yield ConfigProblem(
            shown,
            "gateway.listen",
            f"{gateway.listen!r} is not a loopback address: set gateway.token (a secret reference) "
            "or listen on 127.0.0.1",
        )
    for key, ref in (("gateway.token", gateway.token), ("gateway.metrics_token", gateway.metrics_token)):
        if ref is None:
            continue
        try:
            problem = token_problem(resolve_secret(ref, base=base))
        except EmptySecret as exc:
            problem = str(exc)
        except SecretError:
            problem = None  # resolved in the daemon's environment, checked there at start
        if problem:
            yield ConfigProblem(shown, key, problem)
    if gateway.metrics_token is not None and not gateway.metrics:
        yield ConfigProblem(shown, "gateway.metrics_token", "set gateway.metrics = true to serve /metrics")


def gateway_token_problems(
    gateway: GatewayConfig | None, lookup: Callable[[SecretRef], str], *, shown: str
) -> list[ConfigProblem]:
    """Resolve the gateway's tokens now (before the daemon opens anything); one problem per unusable one."""
    if gateway is None:
        return []
    problems: list[ConfigProblem] = []
    for key, ref in (("gateway.token", gateway.token), ("gateway.metrics_token", gateway.metrics_token)):
        if ref is None:
            continue
        try:
            problem = token_problem(lookup(ref))
        except SecretError as exc:
            problem = str(exc)
        if problem:
            problems.append(ConfigProblem(shown, key, problem))
    return problems


def token_problem(token: str) -> str | None:
    """Return why `token` may not guard the gateway (too short), or None; never shows the token."""
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"the token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return None
