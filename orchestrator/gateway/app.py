"""The aiohttp application: routes, bearer-token auth and JSON errors everywhere."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from loguru import logger

from orchestrator.errors import UnknownAgent
from orchestrator.gateway import handlers
from orchestrator.gateway.metrics import METRICS_PATH, metrics, metrics_authorized
from orchestrator.gateway.state import GATEWAY, GatewayState, json_error
from orchestrator.seam import InteractivityNotAllowed
from orchestrator.store import BadUsageQuery

__all__ = ["build_app"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Error codes by HTTP status for what aiohttp itself raises (routing, body size).
_CODES: Final = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    503: "unavailable",
}


def build_app(state: GatewayState, *, max_body_bytes: int) -> web.Application:
    """Return the application; the caller runs it (see `open_gateway`)."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_errors, _auth])
    app[GATEWAY] = state
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/api/agents", handlers.agents)
    app.router.add_get("/api/agents/{agent}/tools", handlers.tools)
    app.router.add_get("/api/agents/{agent}/policy", handlers.policy)
    app.router.add_post("/api/agents/{agent}/messages", handlers.messages)
    app.router.add_get("/api/usage", handlers.usage)
    app.router.add_get(METRICS_PATH, metrics)
    return app


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except UnknownAgent as exc:
        return json_error(404, "unknown_agent", str(exc))
    except (InteractivityNotAllowed, BadUsageQuery) as exc:
        return json_error(400, "bad_request", str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _CODES.get(exc.status, "http_error")
        detail = exc.text if exc.text and not exc.text.startswith(f"{exc.status}:") else exc.reason
        response = json_error(exc.status, code, detail or exc.reason)
        if exc.status == 405 and "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception as exc:  # one bad request must not take the gateway down
        logger.opt(exception=exc).error("gateway: {} {} failed", request.method, request.path)
        return json_error(500, "internal", "the request failed; the error is logged")


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[GATEWAY]
    token = state.token
    if request.path == METRICS_PATH:  # the scrape token may read the metrics and nothing else
        scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
        if not metrics_authorized(state, bearer.strip() if scheme.lower() == "bearer" else None):
            return _unauthorized()
        return await handler(request)
    if token is not None:
        scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
        # compare_digest: the time taken does not reveal how much of the token matched
        if scheme.lower() != "bearer" or not hmac.compare_digest(offered.strip().encode(), token.encode()):
            return _unauthorized()
    return await handler(request)


def _unauthorized() -> web.Response:
    response = json_error(401, "unauthorized", "send 'Authorization: Bearer <token>'")
    response.headers["WWW-Authenticate"] = 'Bearer realm="orchestrator"'
    return response
