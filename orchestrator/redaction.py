"""One redaction for text that leaves the process: log lines and tool results.

Every secret value the config resolves (`resolve_secret` registers it as it is read) and
every Telegram bot token inside a URL (`/bot<digits>:<token>`) is replaced by `MARKER`.
One compiled alternation is rebuilt only when the set of secrets changes. Text is first
checked with `str.__contains__` per needle (C substring search, far cheaper than the regex's
per-position alternation on text that holds none), so the common case costs a few µs for a
log line and well under a millisecond for a full 16,000-character tool result.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Final

__all__ = ["MARKER", "MIN_SECRET_CHARS", "Redactor", "redact", "register_secret"]

MARKER: Final = "[redacted]"
MIN_SECRET_CHARS: Final = 4
"""Shorter values are not redacted: they would match ordinary words and digits everywhere."""

# Not a lookbehind: a pattern that starts with a literal lets the regex engine skip ahead fast.
_BOT_TOKEN: Final = r"(/bot)\d+:[A-Za-z0-9_-]+"


class Redactor:
    """Replace registered secret values and bot tokens in URLs with `MARKER`."""

    __slots__ = ("_lock", "_needles", "_pattern", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern, self._needles = _compile(self._values)

    def register(self, value: str) -> None:
        """Redact `value` (and its JSON-escaped form) from now on."""
        forms = {value, json.dumps(value)[1:-1]} if len(value) >= MIN_SECRET_CHARS else set()
        if forms <= self._values:  # the common case: already known, nothing rebuilt
            return
        with self._lock:
            values = self._values | forms
            (self._pattern, self._needles), self._values = _compile(values), values

    def redact(self, text: str) -> str:
        """Return `text` with every secret value and bot token replaced by `MARKER`."""
        pattern, needles = self._pattern, self._needles  # one consistent pair, even mid-register
        for needle in needles:
            if needle in text:
                return pattern.sub(_replacement, text)
        return text


def _compile(values: frozenset[str]) -> tuple[re.Pattern[str], tuple[str, ...]]:
    # Longest first: a secret that contains another is replaced whole.
    ordered = sorted(values, key=len, reverse=True)
    pattern = re.compile("|".join([_BOT_TOKEN, *(re.escape(v) for v in ordered)]))
    return pattern, ("/bot", *ordered)


def _replacement(match: re.Match[str]) -> str:
    return (match.group(1) or "") + MARKER


_REDACTOR: Final = Redactor()


def register_secret(value: str) -> None:
    """Redact `value` from every log line and tool result of this process from now on."""
    _REDACTOR.register(value)


def redact(text: str) -> str:
    """Return `text` with every secret this process resolved, and bot tokens in URLs, redacted."""
    return _REDACTOR.redact(text)
