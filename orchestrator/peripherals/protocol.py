"""The `jsonl` peripheral protocol: one JSON request per line out, one JSON reply per line back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_LINE_BYTES", "GarbageLine", "Reply", "encode_request", "parse_reply"]

# A reply longer than this is treated as garbage (a runaway device must not grow memory).
MAX_LINE_BYTES: Final = 256 * 1024


class GarbageLine(ValueError):
    """A line from the device that is not a well-formed reply."""

    def __init__(self, line: bytes, reason: str) -> None:
        self.line, self.reason = line, reason
        shown = line[:80].decode("utf-8", "replace")
        super().__init__(f"{reason}: {shown!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One decoded reply: `{"id": N, "ok": true, "result": ...}` or `{"id": N, "ok": false, "error": "..."}`."""

    id: int
    ok: bool
    result: Any = None
    error: str = ""


def encode_request(request_id: int, command: str, args: Mapping[str, Any]) -> bytes:
    """Return the request line `{"id": N, "cmd": ..., "args": {...}}` terminated by a newline."""
    body = {"id": request_id, "cmd": command, "args": dict(args)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def parse_reply(line: bytes) -> Reply:
    """Decode one reply line (without its newline); raises `GarbageLine` for anything else."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise GarbageLine(line, "not a JSON line") from exc
    if not isinstance(data, dict):
        raise GarbageLine(line, "not a JSON object")
    request_id, ok = data.get("id"), data.get("ok")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise GarbageLine(line, "reply without an integer 'id'")
    if not isinstance(ok, bool):
        raise GarbageLine(line, "reply without a boolean 'ok'")
    if ok:
        return Reply(id=request_id, ok=True, result=data.get("result"))
    error = data.get("error")
    return Reply(id=request_id, ok=False, error=error if isinstance(error, str) else json.dumps(error))
