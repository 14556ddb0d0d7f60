"""Inline attachments of `POST /api/agents/{a}/messages`: base64 files in the JSON body.

Each entry is `{"kind": "image" | "document" | "voice" | "audio" | "video", "mime": "...",
"data": "<base64>", "name": "optional"}`; the body as a whole is bounded by the gateway's
`max_body_bytes`, and every file then goes through the media intake under the agent's policy.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from typing import Any, Final

from aiohttp import web

from orchestrator.media import Incoming, bytes_fetch

__all__ = ["attachments_fingerprint", "inline_attachments"]

_KINDS: Final = frozenset({"image", "document", "voice", "audio", "video"})
_KEYS: Final = frozenset({"kind", "mime", "data", "name"})
_MAX_ATTACHMENTS: Final = 10


def inline_attachments(body: Any) -> list[Incoming]:
    """Return the body's `attachments` as intake items; raises 400 for a malformed entry."""
    raw = body.get("attachments") if isinstance(body, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > _MAX_ATTACHMENTS:
        raise web.HTTPBadRequest(text=f"'attachments' must be a list of at most {_MAX_ATTACHMENTS} files")
    items = []
    for index, entry in enumerate(raw):
        where = f"attachments[{index}]"
        if not isinstance(entry, dict) or set(entry) - _KEYS or not {"kind", "mime", "data"} <= set(entry):
            raise web.HTTPBadRequest(text=f'{where} must be {{"kind": ..., "mime": ..., "data": base64, "name": optional}}')
        kind, mime, data, name = entry["kind"], entry["mime"], entry["data"], entry.get("name")
        if kind not in _KINDS:
            raise web.HTTPBadRequest(text=f"{where}.kind must be one of {', '.join(sorted(_KINDS))}")
        if not isinstance(mime, str) or not isinstance(data, str) or not (name is None or isinstance(name, str)):
            raise web.HTTPBadRequest(text=f"{where}: mime, data and name must be strings")
        try:
            decoded = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise web.HTTPBadRequest(text=f"{where}.data is not valid base64") from None
        items.append(Incoming(kind=kind, mime=mime, size=len(decoded), name=name, fetch=bytes_fetch(decoded),
                              digest=hashlib.sha256(decoded).hexdigest()))
    return items


def attachments_fingerprint(items: Sequence[Incoming]) -> str:
    """Return what the idempotency fingerprint adds for the attachments (their kinds, types and digests)."""
    return "".join(f"\x00{i.kind}:{i.mime}:{i.name}:{i.digest}" for i in items)
