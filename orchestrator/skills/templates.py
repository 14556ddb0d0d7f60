"""Argv and URL templates: where a skill tool's checked argument values may go, and nowhere else.

Argv: a placeholder is a whole element (`"{count}"`), so a value is always exactly one
argument and never glued to an option (`"--n={count}"` is refused at load); `argv[0]` is
always literal. URL: placeholders only in the path and query, each value percent-encoded
with nothing kept safe, so a value can change neither the host nor the URL's structure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit

__all__ = ["ArgvTemplate", "UrlTemplate", "parse_argv", "parse_url"]

_PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BRACES: Final = re.compile(r"[{}]")
# Path values that a client or server would normalise into another path.
_DOT_SEGMENTS: Final = frozenset({"", ".", ".."})

Problem = tuple[str, str]  # (dotted path inside the tool, message)


@dataclass(frozen=True, slots=True)
class _Piece:
    """A literal text, or (when `name` is set) the slot of one argument."""

    text: str = ""
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgvTemplate:
    """An argv list whose placeholders are whole elements."""

    pieces: tuple[_Piece, ...]

    @property
    def names(self) -> frozenset[str]:
        """Return the argument names this template uses."""
        return frozenset(p.name for p in self.pieces if p.name is not None)

    @property
    def literals(self) -> tuple[tuple[int, str], ...]:
        """Return (index, text) of every literal element; `argv[0]` is always one."""
        return tuple((i, p.text) for i, p in enumerate(self.pieces) if p.name is None)

    def render(self, values: Mapping[str, str]) -> tuple[str, ...]:
        """Return the argv with each placeholder replaced by its (checked) value."""
        return tuple(p.text if p.name is None else values[p.name] for p in self.pieces)


@dataclass(frozen=True, slots=True, kw_only=True)
class UrlTemplate:
    """A URL with a fixed scheme and host; placeholders only in its path and query."""

    origin: str
    path: tuple[_Piece, ...]
    query: tuple[_Piece, ...]

    @property
    def names(self) -> frozenset[str]:
        """Return the argument names this template uses."""
        return frozenset(p.name for p in (*self.path, *self.query) if p.name is not None)

    @property
    def path_names(self) -> frozenset[str]:
        """Return the argument names used in the path (their values may not be dot segments)."""
        return frozenset(p.name for p in self.path if p.name is not None)

    def refusal(self, name: str, value: str) -> str | None:
        """Return why `value` may not fill `name`'s slot, or None."""
        if name in self.path_names and value in _DOT_SEGMENTS:
            return f"{value!r} is not allowed in the URL path"
        return None

    def render(self, values: Mapping[str, str]) -> str:
        """Return the URL with every value percent-encoded into its slot."""

        def join(pieces: tuple[_Piece, ...]) -> str:
            return "".join(p.text if p.name is None else quote(values[p.name], safe="") for p in pieces)

        query = join(self.query)
        return self.origin + join(self.path) + (f"?{query}" if self.query else "")


def parse_argv(argv: Sequence[str]) -> tuple[ArgvTemplate | None, list[Problem]]:
    """Return the template, or None and its problems (paths like `argv[2]`)."""
    problems: list[Problem] = []
    pieces: list[_Piece] = []
    if not argv:
        return None, [("argv", "must name a command")]
    for index, element in enumerate(argv):
        where = f"argv[{index}]"
        whole = _PLACEHOLDER.fullmatch(element)
        if whole is not None:
            if index == 0:
                problems.append((where, "the command must be literal, not a placeholder"))
            pieces.append(_Piece(name=whole[1]))
            continue
        literal = element.replace("{{", "").replace("}}", "")
        if _BRACES.search(literal):
            problems.append(
                (where, f"{element!r}: a placeholder must be a whole argv element like \"{{name}}\" "
                 "(write {{ and }} for literal braces)")
            )
        elif "\x00" in element:
            problems.append((where, "contains a NUL character"))
        elif index == 0 and not element:
            problems.append((where, "the command must not be empty"))
        pieces.append(_Piece(text=element.replace("{{", "{").replace("}}", "}")))
    return (None if problems else ArgvTemplate(pieces=tuple(pieces))), problems


def parse_url(url: str) -> tuple[UrlTemplate | None, list[Problem]]:
    """Return the template, or None and its problems (path `url`)."""
    parts = urlsplit(url)
    problems: list[Problem] = []
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        problems.append(("url", f"{url!r} must be an absolute http:// or https:// URL"))
    elif _BRACES.search(parts.netloc):
        problems.append(("url", "placeholders may not be in the host; only in the path and query"))
    if parts.fragment:
        problems.append(("url", "a fragment is never sent; remove it"))
    path, path_problems = _pieces(parts.path)
    query, query_problems = _pieces(parts.query)
    problems.extend(("url", m) for m in (*path_problems, *query_problems))
    if problems:
        return None, problems
    origin = f"{parts.scheme}://{parts.netloc}"
    return UrlTemplate(origin=origin, path=path, query=query), []


def _pieces(text: str) -> tuple[tuple[_Piece, ...], list[str]]:
    pieces: list[_Piece] = []
    problems: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        pieces.append(_Piece(text=text[position : match.start()]))
        pieces.append(_Piece(name=match[1]))
        position = match.end()
    pieces.append(_Piece(text=text[position:]))
    literal = "".join(p.text for p in pieces)
    if _BRACES.search(literal):
        problems.append(f"stray brace in {text!r}: placeholders look like {{name}}")
    return tuple(p for p in pieces if p.name is not None or p.text), problems
