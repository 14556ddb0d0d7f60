"""GET /metrics: the daemon's Prometheus metrics, and which bearer tokens may scrape them."""

from __future__ import annotations

import hmac
from typing import Final

from aiohttp import web

from orchestrator.gateway.state import GATEWAY, GatewayState, json_error

__all__ = ["METRICS_PATH", "metrics", "metrics_authorized"]

METRICS_PATH: Final = "/metrics"


async def metrics(request: web.Request) -> web.Response:
    """Render the metrics (the state gauges read now); 404 while `gateway.metrics` is off."""
    observed = request.app[GATEWAY].host.observability.metrics
    if observed is None:
        return json_error(404, "not_found", "metrics are off: set gateway.metrics = true")
    from orchestrator.observability import CONTENT_TYPE  # prometheus_client is loaded by now

    body = observed.exposition()  # counters in memory and a few cheap reads: no thread needed
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


def metrics_authorized(state: GatewayState, offered: str | None) -> bool:
    """Return whether a scrape offering `offered` (None: no bearer token) may read /metrics.

    The scrape token or the gateway token (the latter can do more than read); with neither
    configured the gateway listens on loopback only and no token is needed.
    """
    tokens = [t for t in (state.metrics_token, state.token) if t is not None]
    if not tokens:
        return True
    if offered is None:
        return False
    # compare_digest against each: the time taken does not reveal how much of a token matched
    return any(hmac.compare_digest(offered.encode(), token.encode()) for token in tokens)
