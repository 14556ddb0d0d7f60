"""What an approver may be shown as it is: a conservative printable set, everything else escaped.

A character is shown as itself only when it is a letter, a combining mark on a letter or
digit (at most `_MAX_MARKS` in a row), a digit, punctuation, a symbol, or the plain space,
and is not default-ignorable (Unicode's Default_Ignorable_Code_Point: the Hangul fillers
U+3164 / U+115F / U+1160 / U+FFA0, the combining grapheme joiner U+034F, variation
selectors, zero-width and bidi controls, tags) nor the blank braille pattern U+2800, nor a
styled or width variant that would pass for ASCII (fullwidth `ｒ`, mathematical `𝚛`, `ℌ`).
Everything else is escaped as `\\uXXXX` (`\\UXXXXXXXX` past the BMP; `\\n`, `\\t`, `\\r`
for those): control and format characters, every space but U+0020 (U+3000, U+00A0, ...),
line and paragraph separators, surrogates, private use and unassigned code points. The
properties come from the `regex` library's Unicode tables (kept current with Unicode;
Python's own `unicodedata` lags and has no script or default-ignorable property).

A run of more than `_MAX_BLANKS` blank characters (whitespace or default-ignorable) is
shown as its count, `[1500 spaces]` or `[1500 x \\u3000]`, so padding cannot push the rest
of a value out of view. A word (a run between blanks) whose letters come from more than
one script is flagged before it, `[mixed scripts: Cyrillic+Latin]рasswd.txt`, except the
mixes Unicode's UTS #39 calls highly restrictive (Latin with Han and Japanese kana, with
Han and Bopomofo, or with Han and Hangul).
"""

from __future__ import annotations

import functools
import json
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import regex

__all__ = ["Shown", "shown_name", "shown_value"]

# Marks beyond this many on one base are escaped: enough for Vietnamese or Thai, not for a
# stack that overprints its neighbours.
_MAX_MARKS: Final = 4
# A longer run of blanks is shown as its count.
_MAX_BLANKS: Final = 8
_PRINTABLE: Final = regex.compile(r"[\p{L}\p{N}\p{P}\p{S} ]")
_MARK: Final = regex.compile(r"\p{M}")
# Blank-looking although their category says letter, mark or symbol.
_IGNORABLE: Final = regex.compile(r"[\p{Default_Ignorable_Code_Point}\u2800]")
_LETTER: Final = regex.compile(r"\p{L}")
_NEUTRAL: Final = regex.compile(r"[\p{sc=Zyyy}\p{sc=Zinh}\p{sc=Zzzz}]")
_BLANK: Final = regex.compile(r"[\s\p{Z}\p{Default_Ignorable_Code_Point}\u2800]+")
# A word shown exactly as written: printable, no mark, nothing the JSON-like text escapes.
_PLAIN: Final = regex.compile(
    r"(?:(?![\p{Default_Ignorable_Code_Point}\u2800\"\\\p{dt=Font}\p{dt=Wide}\p{dt=Narrow}])[\p{L}\p{N}\p{P}\p{S}])*"
)
# Styled and width variants: escaped when their compatibility form is ASCII (`ｒ`, `𝚛`, `ℌ`).
_STYLED: Final = regex.compile(r"[\p{dt=Font}\p{dt=Wide}\p{dt=Narrow}]")
_NAMED_ESCAPES: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_LONG_ASCII_BLANKS: Final = regex.compile(rf"[\t\n\v\f\r\x1c-\x1f ]{{{_MAX_BLANKS + 1},}}")
# Scripts by the Unicode Script property of each letter. Common and Inherited letters count
# for none; a letter of a script not listed here counts as "another script".
_SCRIPTS: Final = (
    "Latin Cyrillic Greek Han Hiragana Katakana Hangul Bopomofo Arabic Hebrew Armenian Georgian "
    "Devanagari Bengali Gurmukhi Gujarati Oriya Tamil Telugu Kannada Malayalam Sinhala Thai Lao "
    "Tibetan Myanmar Khmer Ethiopic Cherokee Canadian_Aboriginal Mongolian Syriac Thaana Nko "
    "Tifinagh Coptic Glagolitic Gothic Old_Italic Runic Ogham Deseret Osage Vai Lisu Adlam Yi "
    "Javanese Balinese Sundanese Cham Tai_Le Tai_Tham Tai_Viet New_Tai_Lue Buginese Batak Lepcha "
    "Limbu Ol_Chiki Bamum Braille Tagalog Hanunoo Buhid Tagbanwa Samaritan Mandaic Meetei_Mayek "
    "Saurashtra Kayah_Li Rejang Syloti_Nagri Phags_Pa Linear_B Carian Lycian Lydian Old_Persian "
    "Ugaritic Shavian Osmanya Phoenician Avestan Brahmi Kaithi Chakma Sharada Takri Miao Nushu"
).split()
_SCRIPT: Final = regex.compile("|".join(f"(?P<{name}>\\p{{sc={name}}})" for name in _SCRIPTS))
# UTS #39 "highly restrictive": these mixes are one writing system, not a look-alike.
_ONE_SYSTEM: Final = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)


@dataclass(frozen=True, slots=True)
class Shown:
    """One value as an approver reads it (JSON-like, escaped), and whether a word in it mixes scripts."""

    text: str
    mixed: bool


def shown_value(value: Any) -> Shown:
    """Return `value` as JSON-like text with every string shown through the printable set."""
    mixed: list[bool] = []
    text = "".join(_render(value, mixed))
    return Shown(text=text, mixed=any(mixed))


def shown_name(text: str) -> str:
    """Return `text` (a tool or user name) with what is outside the printable set escaped, unquoted."""
    return "".join(_string(text, []))[1:-1]


def _render(value: Any, mixed: list[bool]) -> Iterator[str]:
    if isinstance(value, str):
        yield from _string(value, mixed)
    elif isinstance(value, Mapping):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ", " if index else ""
            yield from _string(str(key), mixed)
            yield ": "
            yield from _render(item, mixed)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            yield ", " if index else ""
            yield from _render(item, mixed)
        yield "]"
    elif value is None or isinstance(value, bool | int | float):
        yield json.dumps(value)
    else:
        yield from _string(str(value), mixed)


def _string(text: str, mixed: list[bool]) -> Iterator[str]:
    if text.isascii():  # most calls: no script to tell, few characters to escape
        yield '"' + "".join(_ascii(text)) + '"'
        return
    yield '"'
    start = 0
    for blanks in _BLANK.finditer(text) if text else ():
        if blanks.start() > start:
            yield from _word(text[start:blanks.start()], mixed)
        start = blanks.end()
        yield _escaped(blanks.group())
    if start < len(text):
        yield from _word(text[start:], mixed)
    yield '"'


def _ascii(text: str) -> Iterator[str]:
    start = 0
    for run in _LONG_ASCII_BLANKS.finditer(text):
        yield _json_ascii(text[start:run.start()])
        yield _counted(run.group())
        start = run.end()
    yield _json_ascii(text[start:])


def _json_ascii(text: str) -> str:
    """Return ASCII `text` escaped as in a JSON string (the C encoder; DEL escaped as well)."""
    return json.dumps(text)[1:-1].replace("\x7f", "\\u007f")


def _word(word: str, mixed: list[bool]) -> Iterator[str]:
    scripts = _scripts_of(word)
    if len(scripts) > 1 and not any(scripts <= system for system in _ONE_SYSTEM):
        mixed.append(True)
        yield f"[mixed scripts: {'+'.join(sorted(scripts))}]"
    if _PLAIN.fullmatch(word):  # the common case: nothing to escape, no mark to count
        yield word
        return
    marks = -1  # marks on the current base so far; -1: no base (the word's start, an escape)
    for char in word:
        if _IGNORABLE.match(char):
            marks = -1
            yield _escaped(char)
        elif _MARK.match(char):
            if 0 <= marks < _MAX_MARKS:
                marks += 1
                yield char
            else:
                yield _escaped(char)
        elif _PRINTABLE.match(char) and not _passes_for_ascii(char):
            named = _NAMED_ESCAPES.get(char)
            marks = 0 if named is None else -1  # no mark sits on an escape's backslash or quote
            yield char if named is None else named
        else:
            marks = -1
            yield _escaped(char)


def _passes_for_ascii(char: str) -> bool:
    return _STYLED.match(char) is not None and unicodedata.normalize("NFKC", char).isascii()


def _scripts_of(word: str) -> frozenset[str]:
    if word.isascii():
        return frozenset({"Latin"}) if any(c.isalpha() for c in word) else frozenset()
    return frozenset(script for char in word if (script := _script(char)) is not None)


@functools.lru_cache(maxsize=4096)
def _script(char: str) -> str | None:
    if not _LETTER.match(char) or _NEUTRAL.match(char):
        return None
    found = _SCRIPT.match(char)
    return found.lastgroup if found is not None and found.lastgroup else "another script"


def _escaped(chars: str) -> str:
    """Return one character escaped, or a blank run (counted when longer than `_MAX_BLANKS`)."""
    if len(chars) > 1:
        if len(chars) > _MAX_BLANKS:
            return _counted(chars)
        return "".join(_escaped(char) for char in chars)
    if chars == " ":
        return chars
    named = _NAMED_ESCAPES.get(chars)
    if named is not None:
        return named
    code = ord(chars)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _counted(run: str) -> str:
    """Return a long blank run as its count: `[12 spaces]`, `[12 x \\u3000]`, or each kind's count."""
    kinds: dict[str, int] = {}
    for char in run:
        kinds[char] = kinds.get(char, 0) + 1
    parts = [f"{count} spaces" if char == " " else f"{count} x {_escaped(char)}" for char, count in kinds.items()]
    if len(parts) == 1:
        return f"[{parts[0]}]"
    return f"[{len(run)} blanks: {', '.join(parts)}]"
