"""The jsonl codec: requests are one line; anything but a well-formed reply is garbage."""

from __future__ import annotations

import json

import pytest

from orchestrator.peripherals import GarbageLine, Reply, encode_request, parse_reply


def test_request_is_one_json_line() -> None:
    line = encode_request(7, "move", {"to": "ü\n"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"id": 7, "cmd": "move", "args": {"to": "ü\n"}}


def test_replies_decode() -> None:
    assert parse_reply(b'{"id": 3, "ok": true, "result": [1, 2]}') == Reply(id=3, ok=True, result=[1, 2])
    assert parse_reply(b'{"id": 3, "ok": false, "error": "stalled"}') == Reply(id=3, ok=False, error="stalled")
    assert parse_reply(b'{"id": 3, "ok": false, "error": {"code": 5}}').error == '{"code": 5}'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"\xff\xfe", "not a JSON line"),
        (b"hello", "not a JSON line"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"ok": true}', "without an integer 'id'"),
        (b'{"id": true, "ok": true}', "without an integer 'id'"),
        (b'{"id": 1, "ok": "yes"}', "without a boolean 'ok'"),
    ],
)
def test_anything_else_is_garbage(line: bytes, reason: str) -> None:
    with pytest.raises(GarbageLine, match=reason):
        parse_reply(line)
