"""The one redaction: resolved secrets and bot tokens in URLs, in every log line and form."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from orchestrator.config import SecretRef, resolve_secret
from orchestrator.logs import configure_logging
from orchestrator.redaction import MARKER, Redactor, redact


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
