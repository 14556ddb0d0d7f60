"""One redaction for text that leaves the process: log lines, tool results, replies, error bodies.

Every secret value the config resolves (`resolve_secret` registers it as it is read) and
every Telegram bot token inside a URL (`/bot<digits>:<token>`) is replaced by `MARKER`.

What is matched, for each secret (its UTF-8 bytes for the encodings):

- its *forms*: the value itself and JSON-escaped; base64, standard and URL-safe, for each of
  the three alignments the secret can have in an encoded stream (it starts at byte 0, 1 or 2
  of a 3-byte group), as the stable inner part that depends on the secret's bytes alone
  (the edge characters it shares with its neighbours differ per text); hex, lower and upper
  case; percent-encoded as `quote` and `quote_plus` write it and with every byte encoded,
  each with upper and lower case hex digits;
- in a form, any run of `WINDOW_CHARS` or more consecutive characters' worth (12 characters
  of the value, 15 base64 characters, 24 hex digits, 36 fully percent-encoded), with any
  whitespace between its characters: a prefix the text itself was cut to, a key split by a
  newline, `base64` output wrapped at 76 columns or `od`/`xxd` hex in groups is found too;
- a form shorter than its window, whole and literally (a value of 4 to 11 characters).
  Values shorter than `MIN_SECRET_CHARS` are not redacted, nor encoded forms shorter than
  `MIN_ENCODED_CHARS` (they would match ordinary text).

So after `redact`, at most `WINDOW_CHARS - 1` consecutive characters of a registered secret
of `WINDOW_CHARS` or more can be left in any of its forms (0 where the whole secret was in the
text: it is replaced whole), and whatever cuts the text afterwards cannot add any: redact
first, then cut, collapse or encode.

The windows of every form go into one Aho-Corasick automaton (`ahocorasick_rs`, Rust), run
once over the text with its whitespace removed; only when it finds something are the hits
mapped back to the text's own offsets. It is rebuilt on the first `redact` after a new
secret is registered. `bench/redaction.py` has the figures.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, quote_plus

import ahocorasick_rs

__all__ = [
    "MARKER",
    "MIN_ENCODED_CHARS",
    "MIN_SECRET_CHARS",
    "WINDOW_CHARS",
    "Redactor",
    "redact",
    "register_secret",
    "touches_secret",
]

MARKER: Final = "[redacted]"
MIN_SECRET_CHARS: Final = 4
"""Shorter values are not redacted: they would match ordinary words and digits everywhere."""
MIN_ENCODED_CHARS: Final = 8
"""Shorter encoded forms (base64 of a value under 7 bytes, say) are not matched."""
WINDOW_CHARS: Final = 12
"""Any run of this many consecutive characters of a secret (in any form) is redacted."""

# Not a lookbehind: a pattern that starts with a literal lets the regex engine skip ahead fast.
_BOT_TOKEN: Final = re.compile(r"(/bot)\d+:[A-Za-z0-9_-]+")
_NON_SPACE: Final = re.compile(r"\S")  # what str.split() keeps (not str.isspace)
_PERCENT: Final = re.compile(r"%[0-9A-F]{2}")
_URLSAFE: Final = str.maketrans("+/", "-_")
# Window length per kind of form, in that form's characters, so that what a form's windows leave
# never decodes to WINDOW_CHARS bytes of the secret: 24 hex digits, 36 `%XX`, and 15 base64
# characters (14 left, 84 bits, with the two edge characters beside them, up to 4 bits each,
# make 11 bytes; 15 left would make 12).
_PLAIN, _HEX, _PERCENT_ALL = WINDOW_CHARS, WINDOW_CHARS * 2, WINDOW_CHARS * 3
_BASE64 = -(-(8 * WINDOW_CHARS - 8) // 6)


def _forms(value: str) -> dict[str, int]:
    """Return every form of `value` that is matched, each with its window length."""
    forms: dict[str, int] = {}

    def add(form: str, window: int, shortest: int = MIN_ENCODED_CHARS) -> None:
        if len(form) >= shortest:
            forms.setdefault(form, window)

    add(value, _PLAIN, MIN_SECRET_CHARS)
    add(json.dumps(value)[1:-1], _PLAIN, MIN_SECRET_CHARS)
    raw = value.encode()
    for shift in range(3):  # the secret starts at byte 0, 1 or 2 of a base64 group
        encoded = base64.b64encode(bytes(shift) + raw).decode("ascii")
        # the characters whose 6 bits all lie inside the secret's bits [8*shift, 8*(shift+n))
        stable = encoded[-(-8 * shift // 6) : 8 * (shift + len(raw)) // 6]
        add(stable, _BASE64)
        add(stable.translate(_URLSAFE), _BASE64)
    add(raw.hex(), _HEX)
    add(raw.hex().upper(), _HEX)
    for quoted in (quote(value, safe=""), quote_plus(value, safe="")):
        add(quoted, _PLAIN, MIN_SECRET_CHARS)
        add(_PERCENT.sub(lambda m: m[0].lower(), quoted), _PLAIN, MIN_SECRET_CHARS)
    every = "".join(f"%{byte:02X}" for byte in raw)
    add(every, _PERCENT_ALL)
    add(every.lower(), _PERCENT_ALL)
    return forms


@dataclass(frozen=True, slots=True)
class _Matcher:
    """What `redact` runs: built from the registered values, replaced whole when they change."""

    windows: ahocorasick_rs.AhoCorasick | None  # every window, matched on whitespace-free text
    whole: tuple[str, ...]  # forms shorter than their window, longest first

    @classmethod
    def build(cls, values: frozenset[str]) -> _Matcher:
        windows: set[str] = set()
        whole: set[str] = set()
        for value in values:
            for form, window in _forms(value).items():
                squeezed = "".join(form.split())
                if len(squeezed) < window:
                    whole.add(form)
                else:
                    windows.update(squeezed[i : i + window] for i in range(len(squeezed) - window + 1))
        automaton = ahocorasick_rs.AhoCorasick(sorted(windows)) if windows else None
        return cls(automaton, tuple(sorted(whole, key=len, reverse=True)))


_EMPTY: Final = _Matcher(None, ())


class Redactor:
    """Replace registered secret values (in every form) and bot tokens in URLs with `MARKER`."""

    __slots__ = ("_lock", "_matcher", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._matcher: _Matcher | None = _EMPTY  # None: built from `_values` on the next redact

    def register(self, value: str) -> None:
        """Redact `value` (in every form it is matched in) from now on."""
        if len(value) < MIN_SECRET_CHARS or value in self._values:  # the common case: known
            return
        with self._lock:
            self._values = self._values | {value}
            self._matcher = None  # built on the next redact: a burst of registrations builds once

    def redact(self, text: str) -> str:
        """Return `text` with every secret value and bot token replaced by `MARKER`."""
        if "/bot" in text:  # first, so the bot's id goes with its token
            text = _BOT_TOKEN.sub(rf"\1{MARKER}", text)
        matcher = self._current()  # one value, read once: consistent even mid-register
        if matcher.windows is not None:
            text = _cut_windows(text, matcher.windows)
        for form in matcher.whole:
            if form in text:
                text = text.replace(form, MARKER)
        return text

    def touches(self, text: str) -> bool:
        """Return True when `redact` would change `text` (cheaper than comparing)."""
        if _BOT_TOKEN.search(text) is not None:
            return True
        matcher = self._current()
        if matcher.windows is not None and matcher.windows.find_matches_as_indexes("".join(text.split())):
            return True
        return any(form in text for form in matcher.whole)

    def _current(self) -> _Matcher:
        matcher = self._matcher
        if matcher is None:
            with self._lock:
                matcher = self._matcher
                if matcher is None:
                    self._matcher = matcher = _Matcher.build(self._values)
        return matcher


def _cut_windows(text: str, windows: ahocorasick_rs.AhoCorasick) -> str:
    """Replace every run of text the windows cover (whitespace inside it included) by one `MARKER`."""
    squeezed = "".join(text.split())
    hits = windows.find_matches_as_indexes(squeezed, overlapping=True)
    if not hits:
        return text
    spans: list[list[int]] = []
    for start, end in sorted((start, end) for _, start, end in hits):
        if spans and start < spans[-1][1]:  # overlapping: one run (two secrets side by side stay two)
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    if len(squeezed) != len(text):
        spans = _in_text(text, spans)
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        pieces.append(text[done:start])
        pieces.append(MARKER)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _in_text(text: str, spans: list[list[int]]) -> list[list[int]]:
    """Map sorted spans of the whitespace-free text back to `text`'s own offsets.

    A cursor walks forward once: each step jumps as many characters as are still missing and
    counts the non-whitespace among them in C (`str.split`), so a text of sparse whitespace
    takes a few steps per span, never a Python step per word.
    """
    at = seen = 0  # `seen`: the non-whitespace characters in text[:at]

    def seek(target: int) -> int:  # where the target-th non-whitespace character is
        nonlocal at, seen
        while seen < target:
            missing = target - seen
            seen += sum(map(len, text[at : at + missing].split()))
            at += missing
        found = _NON_SPACE.search(text, at)
        at = found.start() if found is not None else len(text)
        return at

    return [[seek(start), seek(end - 1) + 1] for start, end in spans]


_REDACTOR: Final = Redactor()


def register_secret(value: str) -> None:
    """Redact `value` from every log line, tool result and reply of this process from now on."""
    _REDACTOR.register(value)


def redact(text: str) -> str:
    """Return `text` with every secret this process resolved, and bot tokens in URLs, redacted."""
    return _REDACTOR.redact(text)


def touches_secret(text: str) -> bool:
    """Return True when `redact(text)` would change `text`."""
    return _REDACTOR.touches(text)
