"""The docs stay true to the code: every config key documented, every link resolving, a short README.

The convention `docs/configuration.md` follows (and states at its top): each config key is the
first cell of a Markdown table row, as its full dotted path in backticks, with `<name>` for a
table the admin names and `[]` for one entry of an array of tables
(`agents.<name>.shell.sandbox`, `routes[].agent`, `sops.<name>.steps[].prompt`). Keys of one
channel kind sit under a heading containing `kind = "<kind>"`. Table-valued keys (a nested
model) are documented by their section, so only leaf keys are rows.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from orchestrator.cli import main
from orchestrator.config import Config

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
MAX_README_LINES = 150  # issue 27: a front door, the rest in docs/

# A key row: `| `a.b.c` | ...`; a heading naming a channel kind: `... kind = "slack" ...`.
KEY_ROW = re.compile(r"^\|\s*`([a-z_][a-z0-9_<>.\[\]]*)`\s*\|")
KIND_HEADING = re.compile(r'kind = "([a-z]+)"')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
# [text](target) outside inline code; images too.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")

Key = tuple[str, str | None]  # (dotted path, channel kind or None)


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Annotated, Optional and unions)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _models(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [model for arg in get_args(annotation) for model in _models(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _kind(model: type[BaseModel], variants: list[type[BaseModel]], inherited: str | None) -> str | None:
    """The discriminator value naming `model` among several variants, else the inherited one."""
    if len(variants) < 2:
        return inherited
    (value,) = get_args(model.model_fields["kind"].annotation)
    return str(value)


def config_keys(model: type[BaseModel] = Config, prefix: str = "", kind: str | None = None) -> Iterator[Key]:
    """Walk the config models from the root: every leaf key as (dotted path, channel kind)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = field.annotation
        origin = get_origin(annotation)
        if origin is dict:
            nested, suffix = _models(get_args(annotation)[1]), ".<name>."
        elif origin is tuple:
            nested, suffix = _models(get_args(annotation)[0]), "[]."
        else:
            nested, suffix = _models(annotation), "."
        if not nested:
            yield path, kind
        for sub in nested:
            yield from config_keys(sub, path + suffix, _kind(sub, nested, kind))


def _prose(text: str) -> Iterator[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def documented_keys(text: str) -> list[Key]:
    """Every key row of the configuration page, with the channel kind its section names."""
    keys: list[Key] = []
    kind: str | None = None
    for line in _prose(text):
        if heading := HEADING.match(line):
            found = KIND_HEADING.search(heading.group(2))
            kind = found.group(1) if found else None
        elif row := KEY_ROW.match(line):
            keys.append((row.group(1), kind))
    return keys


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\*|_(?=\W)|(?<=\W)_", "", heading.lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown file's headings define (repeats numbered as GitHub does)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _prose(path.read_text(encoding="utf-8")):
        if heading := HEADING.match(line):
            slug = _slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_every_config_key_is_documented() -> None:
    documented = set(documented_keys(CONFIGURATION.read_text(encoding="utf-8")))
    missing = sorted((key for key in config_keys() if key not in documented), key=str)
    assert not missing, f"config keys missing from docs/configuration.md: {missing}"


def test_every_documented_key_exists() -> None:
    real = set(config_keys())
    unknown = [key for key in documented_keys(CONFIGURATION.read_text(encoding="utf-8")) if key not in real]
    assert not unknown, f"docs/configuration.md documents keys no config model has: {unknown}"


def test_no_key_is_documented_twice() -> None:
    keys = documented_keys(CONFIGURATION.read_text(encoding="utf-8"))
    repeated = sorted({key for key in keys if keys.count(key) > 1}, key=str)
    assert not repeated, f"documented more than once: {repeated}"


def test_the_walk_reaches_nested_and_union_keys() -> None:
    keys = set(config_keys())
    assert ("agents.<name>.shell.sandbox", None) in keys
    assert ("sops.<name>.steps[].requires_confirmation", None) in keys
    assert ("schedules[].deliver_to.chat", None) in keys
    assert ("channels.<name>.bot_token", "slack") in keys
    assert ("channels.<name>.bot_token", "telegram") not in keys


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken: list[str] = []
    for line in _prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if not linked.exists():
                broken.append(f"{target}: no file {linked}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{page.name}: broken links: {broken}"


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < MAX_README_LINES, f"README.md has {len(lines)} lines; keep it under {MAX_README_LINES}"


def test_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (command,) = [line for line in ci.splitlines() if line.startswith(".venv/bin/pytest")]
    assert f"&& {command}\n```" in README.read_text(encoding="utf-8")
    # and the same extras: a README install without `telemetry` failed at collection
    # (tests/observability imports opentelemetry)
    (install,) = [line for line in ci.splitlines() if line.startswith(".venv/bin/pip install -q -e ")]
    extras = install.removeprefix(".venv/bin/pip install -q -e ")
    assert f".venv/bin/pip install -e {extras} && {command}\n```" in README.read_text(encoding="utf-8")


def _commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main([]) == 2  # no command: the top-level help
    commands = re.findall(r"^    ([a-z]+)\b", capsys.readouterr().out, flags=re.MULTILINE)
    assert "run" in commands and "acp" in commands
    return commands


@pytest.mark.parametrize("page", [README, DOCS / "cli.md"], ids=["README.md", "docs/cli.md"])
def test_every_command_is_listed(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [name for name in _commands(capsys) if f"| `orchestrator {name}" not in text]
    assert not missing, f"{page.name}'s command table lacks: {missing}"


def test_the_readme_says_what_is_needed_before_the_first_command() -> None:
    text = README.read_text(encoding="utf-8")
    first_command = text.index("```sh\n")
    needed = text.index("## What you need")
    assert needed < first_command
    for prerequisite in ("Python 3.11", "model server", "bubblewrap"):
        assert prerequisite in text[needed:first_command], prerequisite


def test_the_license_is_mit_everywhere_it_is_named() -> None:
    import tomllib

    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (project["license"], project["license-files"]) == ("MIT", ["LICENSE"])
    assert "## License\n\nMIT: see [LICENSE](LICENSE)." in README.read_text(encoding="utf-8")
