"""Parse `SKILL.md`: a `---` front matter block of `name` and `description`, then the body.

A hand parser on purpose: the front matter is a flat map of two one-line strings, and
PyYAML would add a dependency plus implicit typing we would have to undo (`name: no` is
False, `name: 1.0` a float). Anything YAML would read differently from plain text (an
indented or multi-line value, a block scalar, ` #` comments, `: ` inside a value, a
leading YAML indicator) is refused with its line number, so what is accepted means the
same to this parser and to YAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from orchestrator.errors import ConfigProblem

__all__ = ["SkillDocument", "parse_skill_md"]

_FENCE: Final = "---"
_KEYS: Final = ("name", "description")
_LINE: Final = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9_-]*):(?:[ \t]+(?P<value>.*?))?[ \t]*")
# Characters that start something other than a plain scalar in YAML.
_INDICATORS: Final = frozenset("[]{}&*!|>%@`,?")
MAX_DESCRIPTION_CHARS: Final = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDocument:
    """The parsed `SKILL.md`: front matter values and the instructions body."""

    name: str
    description: str
    body: str


def parse_skill_md(text: str, *, file: str) -> tuple[SkillDocument | None, list[ConfigProblem]]:
    """Return the document, or None and one problem per defect (each naming `file`)."""
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != _FENCE:
        return None, [ConfigProblem(file, "line 1", "SKILL.md must start with a '---' front matter line")]
    try:
        close = next(i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE)
    except StopIteration:
        return None, [ConfigProblem(file, "line 1", "the front matter is not closed by a '---' line")]
    values: dict[str, str] = {}
    seen: set[str] = set()
    problems: list[ConfigProblem] = []
    refused_key = False  # the indented lines after a refused key are its continuation
    for index in range(1, close):
        line = lines[index]
        where = f"line {index + 1}"
        if not line.strip() or line.lstrip().startswith("#") or (refused_key and line[:1].isspace()):
            continue
        refused_key = True
        match = _LINE.fullmatch(line)
        if match is None:
            problems.append(ConfigProblem(file, where, _shape_problem(line)))
            continue
        key, raw = match["key"], match["value"] or ""
        if key not in _KEYS:
            problems.append(
                ConfigProblem(file, where, f"unknown front matter key {key!r}; expected: {', '.join(_KEYS)}")
            )
            continue
        if key in seen:
            problems.append(ConfigProblem(file, where, f"{key!r} is given twice"))
            continue
        seen.add(key)
        value, problem = _scalar(raw)
        if problem:
            problems.append(ConfigProblem(file, where, f"{key}: {problem}"))
            continue
        values[key] = value
        refused_key = False
    for key in _KEYS:
        if key not in seen and not problems:
            problems.append(ConfigProblem(file, key, "missing from the front matter"))
    description = values.get("description", "")
    if len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(
            ConfigProblem(file, "description", f"longer than {MAX_DESCRIPTION_CHARS} characters")
        )
    if problems:
        return None, problems
    body = "\n".join(lines[close + 1 :]).strip()
    return SkillDocument(name=values["name"], description=description, body=body), []


def _shape_problem(line: str) -> str:
    if line[:1].isspace():
        return "indented lines (nested or multi-line values) are not supported; write 'key: value' on one line"
    return f"expected 'key: value', got {line.strip()[:60]!r}"


def _scalar(raw: str) -> tuple[str, str | None]:
    """Return the value of a one-line scalar, or a problem when YAML would read it otherwise."""
    if not raw:
        return "", "needs a value on the same line"
    quote = raw[0]
    if quote in "\"'":
        if len(raw) < 2 or raw[-1] != quote:
            return "", f"unterminated {quote} quote"
        inner = raw[1:-1]
        if quote in inner or (quote == '"' and "\\" in inner):
            return "", "quotes and backslashes inside a quoted value are not supported"
        return (inner, None) if inner.strip() else ("", "needs a non-empty value")
    sequence = raw[0] == "-" and (len(raw) == 1 or raw[1] == " ")
    if raw[0] in _INDICATORS or raw[0] == "#" or sequence:
        return "", f"a value starting with {raw[0]!r} must be quoted"
    if " #" in raw or ": " in raw or raw.endswith(":"):
        return "", "a value containing ' #' or ': ' must be quoted"
    return raw, None
