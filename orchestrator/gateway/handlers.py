"""The gateway's endpoints; each is a thin caller of `resolve()` on its declared path."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any, Final

from aiohttp import web

from orchestrator.engine import StopReason, log_turn
from orchestrator.gateway.idempotency import StoredResponse, fingerprint
from orchestrator.gateway.multipart import FORM_CONTENT_TYPE, staged_form
from orchestrator.gateway.uploads import attachments_fingerprint, inline_attachments
from orchestrator.media import Incoming, MediaRefused, take_in
from orchestrator.gateway.state import GATEWAY, GatewayHost, json_error
from orchestrator.lifecycle import Lifecycle
from orchestrator.store import parse_grouping, parse_since
from orchestrator.seam import (
    ConstructionPath,
    ResolvedAgentExecution,
    build_gateway_chat,
    build_listing,
    build_on_path,
)

__all__ = ["agents", "health", "messages", "policy", "tools", "usage"]

_SESSION: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_IDEMPOTENCY_KEY: Final = re.compile(r"[\x21-\x7e]{1,255}")
# Every gateway caller holds the one token: they share one action budget per agent.
_ACTOR: Final = "gateway"


async def health(request: web.Request) -> web.Response:
    """Report each channel's and MCP connection's state; 503 while anything is not ready.

    `?detail=1` adds the status document (docs/status.md) under `detail`.
    """
    host = request.app[GATEWAY].host
    channels = {
        name: {"kind": status.kind, "state": status.state.value, "ready": status.ready, "error": status.error}
        for name, status in sorted(host.channels.status().items())
    }
    mcp: list[dict[str, Any]] = []
    if host.services.mcp is not None:
        mcp = [
            {
                "server": s.server,
                "agent": s.agent,
                "state": s.lifecycle.value,
                "ready": s.lifecycle is Lifecycle.READY,
                "error": s.last_error,
            }
            for s in host.services.mcp.status()
        ]
    ready = all(c["ready"] for c in channels.values()) and all(m["ready"] for m in mcp)
    status = "stopping" if not host.accepting else "ok" if ready else "degraded"
    body: dict[str, Any] = {"status": status, "channels": channels, "mcp": mcp}
    if request.query.get("detail") == "1":
        body["detail"] = host.status_document()
    return web.json_response(body, status=200 if status == "ok" else 503)


async def usage(request: web.Request) -> web.Response:
    """Sum the recorded model usage: `?agent=&sender=&since=7d&by=agent|sender|model` (the CLI's report)."""
    query = request.query
    since = parse_since(query.get("since", "7d"), now=time.time(), name="since")
    by = parse_grouping(query.get("by", "agent"), name="by")
    report = request.app[GATEWAY].host.services.usage.report(
        by=by, since=since, agent=query.get("agent") or None, sender=query.get("sender") or None
    )
    return web.json_response(report.describe())


async def agents(request: web.Request) -> web.Response:
    """List the configured agents with their model binding and autonomy (listing path)."""
    host = request.app[GATEWAY].host
    config = host.config
    rows = []
    for name in sorted(config.agents):
        described = _listing(host, name).describe()
        rows.append({k: described[k] for k in ("agent", "provider", "model", "autonomy")})
    return web.json_response({"agents": rows})


async def tools(request: web.Request) -> web.Response:
    """List the tools the agent could use, from its listing-path registry (no peripherals)."""
    execution = _listing(request.app[GATEWAY].host, request.match_info["agent"])
    rows = execution.tool_rows()
    return web.json_response({"agent": execution.identity.agent, "path": "listing", "tools": rows})


async def policy(request: web.Request) -> web.Response:
    """Show the resolved execution a chat turn would run with (`?path=` picks another path)."""
    name = request.match_info["agent"]
    raw = request.query.get("path", ConstructionPath.GATEWAY_CHAT.value)
    try:
        path = ConstructionPath(raw)
    except ValueError:
        choices = ", ".join(p.value for p in ConstructionPath)
        return json_error(400, "bad_request", f"unknown path {raw!r} (one of: {choices})")
    state = request.app[GATEWAY]
    execution = build_on_path(state.host.config, name, path, state.host.services)
    return web.json_response(execution.describe())


async def messages(request: web.Request) -> web.Response:
    """Run one non-interactive turn (whatever needs approval is denied) and return the reply.

    The body is JSON (files inline as base64) or `multipart/form-data` (files streamed to
    disk under the agent's caps, see `gateway.multipart`). With an `Idempotency-Key`
    header, the first response is stored and returned again for the same key without
    running another turn; the same key on a different request is 422.
    """
    state = request.app[GATEWAY]
    host = state.host
    name = request.match_info["agent"]
    if request.content_type == FORM_CONTENT_TYPE:
        # the policy is resolved first: it decides, from each part's headers, what is read
        execution = build_gateway_chat(host.config, name, host.services)
        try:
            async with staged_form(
                request, execution.media, execution.security, max_field_bytes=state.max_body_bytes
            ) as form:
                written = "" if form.text is None and form.items else form.text
                text, session = _chat_fields(written, form.session, attachments=bool(form.items))
                return await _answer(request, execution, text, session, form.items)
        except MediaRefused as exc:  # refused from a part's headers: nothing of it was read or kept
            return json_error(422, "media_refused", exc.reason, agent=execution.identity.agent)
    body = await _json(request)
    attachments = inline_attachments(body)
    text, session = _chat_body(body, attachments=bool(attachments))
    execution = build_gateway_chat(host.config, name, host.services)
    return await _answer(request, execution, text, session, attachments)


async def _answer(
    request: web.Request,
    execution: ResolvedAgentExecution,
    text: str,
    session: str | None,
    attachments: Sequence[Incoming],
) -> web.Response:
    state = request.app[GATEWAY]
    host = state.host
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return _respond(await _chat(host, execution, text, session or uuid.uuid4().hex, attachments=attachments))
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        return json_error(400, "bad_request", "Idempotency-Key must be 1-255 visible ASCII characters")
    asked = fingerprint(execution.identity.agent, text + attachments_fingerprint(attachments), session)
    async with state.idempotency.lock(key):
        stored = state.idempotency.get(key)
        if stored is None:
            stored = await _chat(
                host, execution, text, session or uuid.uuid4().hex, fingerprint=asked, attachments=attachments
            )
            state.idempotency.put(key, stored)
            return _respond(stored)
    if stored.fingerprint != asked:
        return json_error(422, "idempotency_key_reused", "this Idempotency-Key was used for a different request")
    response = _respond(stored)
    response.headers["Idempotent-Replayed"] = "true"
    return response


def _listing(host: GatewayHost, name: str) -> ResolvedAgentExecution:
    return build_listing(host.config, name, host.services)


async def _json(request: web.Request) -> Any:
    raw = await request.read()  # past client_max_size: 413 (HTTPRequestEntityTooLarge)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth is bad input too
        raise web.HTTPBadRequest(text="the body must be JSON") from None


def _chat_body(body: Any, *, attachments: bool = False) -> tuple[str, str | None]:
    if not isinstance(body, dict) or set(body) - {"text", "session", "attachments"}:
        raise web.HTTPBadRequest(
            text='the body must be {"text": "...", "session": "optional id", "attachments": [optional]}'
        )
    return _chat_fields(body.get("text", "" if attachments else None), body.get("session"), attachments=attachments)


def _chat_fields(text: object, session: object, *, attachments: bool) -> tuple[str, str | None]:
    if not isinstance(text, str) or (not text.strip() and not attachments):
        raise web.HTTPBadRequest(text="'text' must be a non-empty string")
    if session is not None and not (isinstance(session, str) and _SESSION.fullmatch(session)):
        raise web.HTTPBadRequest(text="'session' must be 1-128 characters of letters, digits and . _ : -")
    return text, session


async def _chat(
    host: GatewayHost,
    execution: ResolvedAgentExecution,
    text: str,
    session: str,
    *,
    fingerprint: str = "",
    attachments: Sequence[Incoming] = (),
) -> StoredResponse:
    if not host.accepting:
        raise web.HTTPServiceUnavailable(text="the daemon is stopping; retry after it restarts")
    agent = execution.identity.agent
    media: tuple[dict[str, Any], ...] = ()
    if attachments:
        try:
            intake = await take_in(execution.media, execution.security, attachments, text=text)
        except MediaRefused as exc:  # one clear answer; nothing was kept
            refusal = {"error": "media_refused", "detail": exc.reason, "agent": agent, "session": session}
            return StoredResponse(fingerprint=fingerprint, status=422, body=refusal)
        text, media = intake.text, intake.media
    # one turn at a time per session, in arrival order
    started = time.monotonic()
    turn = await host.sessions.run_turn(
        f"@gateway:{agent}:{session}", agent=agent, execution=execution, text=text, approver=None,
        actor=_ACTOR, hooks=(host.counting,), media=media,
    )
    result = turn.completed()
    # one line per turn, as a chat's turns get: `turn gateway:<session> from gateway by <agent>: ...`
    log_turn(channel="gateway", chat=session, sender=_ACTOR, agent=agent, result=result, seconds=time.monotonic() - started)
    body: dict[str, Any] = {
        "agent": agent,
        "session": session,
        "reply": result.text,
        "stop": result.stop.value,
        "executed": list(result.executed),
    }
    if result.stop is StopReason.PROVIDER_ERROR:  # a chat path: the generic line, the detail stays in the log
        failure = {"error": "provider_error", "detail": result.text, "incident": result.incident}
        return StoredResponse(fingerprint=fingerprint, status=502, body={**failure, **body})
    return StoredResponse(fingerprint=fingerprint, status=200, body=body)


def _respond(stored: StoredResponse) -> web.Response:
    return web.json_response(stored.body, status=stored.status)
