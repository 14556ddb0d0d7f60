"""The one redaction: resolved secrets and bot tokens in URLs, in every log line and form."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import string
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote_to_bytes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loguru import logger

from orchestrator import redaction
from orchestrator.config import SecretRef, resolve_secret
from orchestrator.daemon import fit_reply
from orchestrator.engine.shaping import shape_for_model
from orchestrator.logs import configure_logging
from orchestrator.redaction import MARKER, MIN_SECRET_CHARS, WINDOW_CHARS, Redactor, redact, register_secret


def test_registered_values_and_bot_urls_are_replaced() -> None:
    redactor = Redactor()
    redactor.register("abcd-1234")
    redactor.register("abcd-1234-longer")  # contains the first: replaced whole
    redactor.register('q"uote\\d')  # as it appears inside JSON too
    text = (
        'k=abcd-1234 k2=abcd-1234-longer {"v": "q\\"uote\\\\d"} '
        "GET https://api.telegram.org/bot987654:AAF_x-y/sendMessage"
    )
    assert redactor.redact(text) == (
        f'k={MARKER} k2={MARKER} {{"v": "{MARKER}"}} GET https://api.telegram.org/bot{MARKER}/sendMessage'
    )


def test_a_value_too_short_to_be_a_secret_does_not_shred_every_line() -> None:
    redactor = Redactor()
    redactor.register("ab")
    assert redactor.redact("a cab ride") == "a cab ride"


def test_every_resolved_secret_is_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_TEST_REDACT_ENV", "env-secret-7c1d")
    (tmp_path / "token").write_text("file-secret-9a2b\n")
    assert resolve_secret(SecretRef("env:ORCH_TEST_REDACT_ENV")) == "env-secret-7c1d"
    assert resolve_secret(SecretRef("file:token"), base=tmp_path) == "file-secret-9a2b"
    assert redact("env-secret-7c1d / file-secret-9a2b") == f"{MARKER} / {MARKER}"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield None
    logger.remove()
    logger.add(sys.stderr)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("fmt", ["text", "json", "cli"])
def test_exception_text_and_tracebacks_from_any_library_are_redacted(
    fmt: str, monkeypatch: pytest.MonkeyPatch, restore_logging: object
) -> None:
    monkeypatch.setenv("ORCH_TEST_REDACT_TB", "tb-secret-5e6f")
    secret = resolve_secret(SecretRef("env:ORCH_TEST_REDACT_TB"))
    out = io.StringIO()
    configure_logging(level="DEBUG", fmt=fmt, sink=out)

    def connect(token: str) -> None:  # a local holding the secret: loguru's diagnose would print it
        raise ConnectionError(f"refused https://api.telegram.org/bot1:{token}/getMe with {token}")

    try:
        connect(secret)
    except ConnectionError:
        logger.exception("ours failed")
        logging.getLogger("some.sdk").debug("sdk saw %s", secret, exc_info=True)
    written = out.getvalue()
    assert secret not in written
    assert f"/bot{MARKER}/getMe" in written  # the token in the URL, inside the exception text
    assert "ConnectionError" in written and "ours failed" in written and "sdk saw" in written
    assert written.count(MARKER) >= 4
    if fmt == "json":
        assert all(json.loads(line)["text"] for line in written.splitlines())


# -- encodings, whitespace, prefixes (issue 24 item 5, issue 32 item 3) ---------------------------

TOKEN = "7341234567:AAH3kq_Zx-v9LmQpT2sW8yBnD4fGhJ6cE1r"  # a Telegram bot token's shape


def _redactor() -> Redactor:
    redactor = Redactor()
    redactor.register(TOKEN)
    return redactor


@pytest.mark.parametrize("before", [b"", b"a", b"ab", b"token=", b"the bot's token is: "])
def test_base64_of_a_secret_is_redacted_at_every_alignment_in_both_alphabets(before: bytes) -> None:
    redactor = _redactor()
    data = before + TOKEN.encode() + b"\n"
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(data).decode()
        shown = redactor.redact(f"out: {encoded} end")
        assert MARKER in shown and shown.startswith("out: ") and shown.endswith(" end")
        assert _longest_secret_run(_decoded_base64(shown, urlsafe=encode is base64.urlsafe_b64encode)) <= 2


def test_base64_wrapped_at_76_columns_is_redacted() -> None:
    # `base64` wraps its output: the token's encoding is split by a newline when it starts late.
    data = b"x" * 40 + TOKEN.encode()
    wrapped = "\n".join(textwrap.wrap(base64.b64encode(data).decode(), 76))
    assert wrapped[76] == "\n"  # the wrap falls inside the token's encoding (characters 54 to 117)
    shown = _redactor().redact(wrapped)
    assert MARKER in shown
    assert _longest_secret_run(_decoded_base64("".join(shown.split()), urlsafe=False)) <= 2


def test_hex_and_percent_encodings_are_redacted() -> None:
    redactor = _redactor()
    raw = TOKEN.encode()
    forms = [
        raw.hex(), raw.hex().upper(), quote(TOKEN, safe=""), quote(TOKEN, safe="").replace("%3A", "%3a"),
        "".join(f"%{b:02X}" for b in raw), "".join(f"%{b:02x}" for b in raw),
        # `od -An -tx1` and `xxd` print the bytes in groups: whitespace between them
        " ".join(f"{b:02x}" for b in raw), "\n".join(textwrap.wrap(raw.hex(), 32)),
    ]
    for form in forms:
        shown = redactor.redact(f"[{form}]")
        assert shown == f"[{MARKER}]", form
    assert quote(TOKEN, safe="") != TOKEN  # the colon is encoded: a form the literal match misses


def test_a_secret_split_by_a_newline_or_spaces_is_redacted_whole() -> None:
    redactor = _redactor()
    for split in (f"{TOKEN[:20]}\n{TOKEN[20:]}", f"{TOKEN[:9]}\r\n  {TOKEN[9:30]}\t{TOKEN[30:]}"):
        assert redactor.redact(f"body: {split} (401)") == f"body: {MARKER} (401)"


def test_twelve_characters_of_a_secret_are_redacted_eleven_are_not() -> None:
    redactor = _redactor()
    assert redactor.redact(f"a cut: {TOKEN[:WINDOW_CHARS]}") == f"a cut: {MARKER}"
    assert redactor.redact(f"mid {TOKEN[10:10 + WINDOW_CHARS]} mid") == f"mid {MARKER} mid"
    short = TOKEN[: WINDOW_CHARS - 1]
    assert redactor.redact(f"a cut: {short}") == f"a cut: {short}"  # the stated bound: 11 can be left


def test_a_short_secret_is_matched_whole_only() -> None:
    redactor = Redactor()
    redactor.register("pw-7f3a91")  # 9 characters: under the window
    assert redactor.redact("pw-7f3a91 and its hex 70772d37663361393") == f"{MARKER} and its hex 70772d37663361393"
    assert redactor.redact("pw-7f3a9") == "pw-7f3a9"  # a part of a short secret is not matched
    assert redactor.redact("70772d376633613931") == MARKER  # its whole hex form is


def test_a_json_log_line_is_redacted_as_the_text_it_encodes(
    monkeypatch: pytest.MonkeyPatch, restore_logging: object
) -> None:
    # In JSON a newline is the two characters `\n`: a key split by one is whole only decoded.
    monkeypatch.setenv("ORCH_TEST_REDACT_JSON", TOKEN)
    resolve_secret(SecretRef("env:ORCH_TEST_REDACT_JSON"))
    out = io.StringIO()
    configure_logging(level="INFO", fmt="json", sink=out)
    logger.bind(body=f"{TOKEN[:25]}\n{TOKEN[25:]}").warning("echoed {}", f"{TOKEN[:15]}\n{TOKEN[15:]} {quote(TOKEN)}")
    logger.info("nothing secret here")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["record"]["message"] == f"echoed {MARKER} {MARKER}"
    assert first["record"]["extra"]["body"] == MARKER and "WARNING" in first["text"]
    assert _longest_secret_run(out.getvalue()) < WINDOW_CHARS
    assert second["record"]["message"] == "nothing secret here"


# -- the bound, as a property: redact first, then cut ----------------------------------------------

# A secret of capitals and `_-`, in text that has none of them (nor have the cut notes: the
# `T` of "The reply was cut" is left out): every one of them left in what the model or the
# chat is shown is a character of the secret that survived.
_SECRET_CHARS = string.ascii_uppercase.replace("T", "") + "_-"
_FILLER = st.text(alphabet=string.ascii_lowercase + string.digits + " \n.,/=\"'", max_size=300)


def _survivors(shown: str) -> int:
    return sum(1 for c in shown if c in _SECRET_CHARS)


@given(
    secret=st.text(alphabet=_SECRET_CHARS, min_size=MIN_SECRET_CHARS, max_size=64),
    filler=_FILLER,
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_a_secret_anywhere_in_a_text_cut_anywhere_shows_none_of_its_characters(
    secret: str, filler: str, data: st.DataObject
) -> None:
    redactor_values = (redaction._REDACTOR._values, redaction._REDACTOR._matcher)
    try:
        register_secret(secret)
        offset = data.draw(st.integers(0, len(filler)), label="offset")
        text = filler[:offset] + secret + filler[offset:]
        cap = data.draw(st.integers(1, len(text) + 20), label="cap")
        assert _survivors(shape_for_model(text, cap=cap)) == 0
        assert _survivors(fit_reply(text, cap)) == 0
        assert _survivors(shorten_like_a_provider(text)) == 0
    finally:
        redaction._REDACTOR._values, redaction._REDACTOR._matcher = redactor_values


@given(
    secret=st.text(alphabet=_SECRET_CHARS, min_size=MIN_SECRET_CHARS, max_size=64),
    filler=_FILLER,
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_a_text_holding_only_a_prefix_of_a_secret_shows_at_most_eleven_of_its_characters(
    secret: str, filler: str, data: st.DataObject
) -> None:
    redactor_values = (redaction._REDACTOR._values, redaction._REDACTOR._matcher)
    try:
        register_secret(secret)
        kept = data.draw(st.integers(1, len(secret)), label="kept")  # the text was cut there before
        offset = data.draw(st.integers(0, len(filler)), label="offset")
        text = filler[:offset] + secret[:kept] + filler[offset:]
        cap = data.draw(st.integers(1, len(text) + 20), label="cap")
        shown = shape_for_model(text, cap=cap)
        assert _survivors(shown) <= WINDOW_CHARS - 1
        if kept >= WINDOW_CHARS or kept == len(secret):
            assert _survivors(shown) == 0
    finally:
        redaction._REDACTOR._values, redaction._REDACTOR._matcher = redactor_values


@given(
    secret=st.binary(min_size=WINDOW_CHARS, max_size=48).filter(lambda b: len(set(b)) > 4),
    before=st.binary(max_size=40),
    after=st.binary(max_size=40),
    kept=st.integers(1, 48),
    kind=st.sampled_from(["base64", "base64url", "hex", "percent"]),
)
@settings(max_examples=300, deadline=None)
def test_no_twelve_consecutive_bytes_of_a_secret_decode_from_what_is_left(
    secret: bytes, before: bytes, after: bytes, kept: int, kind: str
) -> None:
    value = base64.b85encode(secret).decode()  # a str secret of printable characters
    raw = value.encode()
    redactor = Redactor()
    redactor.register(value)
    data = before + raw[:kept] + after  # the encoded text may itself hold only a prefix
    encoded = {
        "base64": lambda: base64.b64encode(data).decode(),
        "base64url": lambda: base64.urlsafe_b64encode(data).decode(),
        "hex": lambda: data.hex(),
        "percent": lambda: "".join(f"%{b:02X}" for b in data),
    }[kind]()
    shown = redactor.redact(encoded)
    if kind.startswith("base64"):
        readable = _decoded_base64(shown, urlsafe=kind == "base64url")
    elif kind == "hex":
        readable = _decoded_hex(shown)
    else:
        readable = unquote_to_bytes(shown)
    assert _longest_common_run(readable, raw) <= WINDOW_CHARS - 1


def shorten_like_a_provider(text: str) -> str:
    """A provider's error text as it is logged: `Endpoint.shorten` of a bare client."""
    import openai

    from orchestrator.providers._transport import Endpoint

    endpoint = Endpoint(
        name="p", url="http://127.0.0.1:9/v1", key=None, overrides=None, timeout_s=1, api="chat", what="answer",
        sdk=openai, sdk_error=openai.OpenAIError, status_failure=lambda exc: exc,
    )
    return endpoint.shorten(text)


def _longest_secret_run(text: str | bytes) -> int:
    raw = TOKEN.encode()
    return _longest_common_run(text.encode() if isinstance(text, str) else text, raw)


def _longest_common_run(a: bytes, b: bytes) -> int:
    """The length of the longest run of bytes `a` and `b` share."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


# Between decoded runs: a byte no base85 secret holds (`|` is in its alphabet, and a run
# joined to it by the separator looked like one more byte of the secret).
_APART: Final = b"\n"


def _decoded_base64(text: str, *, urlsafe: bool) -> bytes:
    """Every byte decodable from the base64 runs of `text`, at each of the four offsets."""
    alphabet = "A-Za-z0-9_-" if urlsafe else "A-Za-z0-9+/"
    out = b""
    for run in re.findall(f"[{alphabet}]+", text):
        for start in range(4):
            body = run[start:][: (len(run) - start) // 4 * 4]
            out += _APART + (base64.urlsafe_b64decode(body) if urlsafe else base64.b64decode(body))
    return out


def _decoded_hex(text: str) -> bytes:
    out = b""
    for run in re.findall("[0-9a-fA-F]+", text):
        for start in range(2):
            body = run[start:][: (len(run) - start) // 2 * 2]
            out += _APART + bytes.fromhex(body)
    return out
