"""Load skill directories (`SKILL.md`, optional `skill.toml`), at most once per config generation."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from weakref import WeakKeyDictionary

from orchestrator.config import Config
from orchestrator.errors import ConfigError, ConfigProblem
from orchestrator.skills.front_matter import parse_skill_md
from orchestrator.skills.manifest import NAME_PATTERN, SkillToolDef, parse_manifest
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir

__all__ = ["Skill", "SkillCatalog", "find_skill_dirs", "load_skill", "skill_catalog"]

SKILL_FILE: Final = "SKILL.md"
MANIFEST_FILE: Final = "skill.toml"
SCRIPTS_DIR: Final = "scripts"
# The body goes into the system prompt of every turn: keep it a prompt, not a book.
MAX_SKILL_MD_CHARS: Final = 100_000
_EXECUTABLE: Final = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One loaded skill: prompt instructions and the tools it declares (unbound)."""

    name: str
    description: str
    instructions: str
    directory: Path
    tools: tuple[SkillToolDef, ...]

    def prompt_section(self) -> tuple[str, str]:
        """Return the (section name, text) this skill adds to the system prompt."""
        lines = [f"## Skill: {self.name}", self.description]
        if self.tools:
            names = ", ".join(f"{self.name}__{t.name}" for t in self.tools)
            lines.append(f"Tools of this skill (when granted to you): {names}")
        if self.instructions:
            lines += ["", self.instructions]
        return f"skill:{self.name}", "\n".join(lines)


def load_skill(directory: Path, *, allow_scripts: bool) -> Skill:
    """Read and validate one skill directory.

    Raises `ConfigError` with one `file: path: message` problem per defect: malformed
    front matter, a name differing from the directory's, an invalid `skill.toml`, or
    (unless `allow_scripts`) an executable file, a `scripts/` directory or a symbolic
    link anywhere inside the directory.
    """
    problems: list[ConfigProblem] = []
    if not allow_scripts:
        problems.extend(_script_problems(directory))
    skill_md = directory / SKILL_FILE
    text = _read(skill_md, problems)
    document = None
    if text is not None:
        if len(text) > MAX_SKILL_MD_CHARS:
            problems.append(ConfigProblem(str(skill_md), "", f"longer than {MAX_SKILL_MD_CHARS} characters"))
        else:
            document, found = parse_skill_md(text, file=str(skill_md))
            problems.extend(found)
    if document is not None:
        if NAME_PATTERN.fullmatch(directory.name) is None:
            problems.append(ConfigProblem(
                str(skill_md), "name",
                f"skill name {directory.name!r} must be lowercase letters and digits joined by single '-' or '_'",
            ))
        elif document.name != directory.name:
            problems.append(ConfigProblem(
                str(skill_md), "name", f"{document.name!r} must equal the skill's directory name {directory.name!r}"
            ))
    tools = _tools(directory, problems)
    if problems or document is None:
        raise ConfigError(problems)
    return Skill(
        name=document.name,
        description=document.description,
        instructions=document.body,
        directory=directory,
        tools=tools,
    )


class SkillCatalog:
    """The skills under `[skills] dirs` of one config generation, each loaded at most once."""

    __slots__ = ("_allow_scripts", "_dirs", "_loaded")

    def __init__(self, *, dirs: Mapping[str, Path], allow_scripts: bool) -> None:
        self._dirs = dict(dirs)
        self._allow_scripts = allow_scripts
        self._loaded: dict[str, Skill | ConfigError] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._dirs

    def load(self, name: str) -> Skill:
        """Return the skill called `name`; raises `ConfigError` (cached) when it is invalid or absent."""
        cached = self._loaded.get(name)
        if cached is None:
            directory = self._dirs.get(name)
            if directory is None:
                cached = ConfigError([ConfigProblem("[skills] dirs", "", f"no skill directory {name!r}")])
            else:
                try:
                    cached = load_skill(directory, allow_scripts=self._allow_scripts)
                except ConfigError as exc:
                    cached = exc
            self._loaded[name] = cached
        if isinstance(cached, ConfigError):
            raise cached
        return cached


# One catalog per config generation: the config check loads each referenced skill, and
# every resolve() of that generation reuses it (nothing re-reads skill files per turn).
_CATALOGS: WeakKeyDictionary[Config, SkillCatalog] = WeakKeyDictionary()


def skill_catalog(config: Config) -> SkillCatalog:
    """Return the skill catalog of this config generation."""
    catalog = _CATALOGS.get(config)
    if catalog is None:
        catalog = _CATALOGS[config] = SkillCatalog(
            dirs=find_skill_dirs(config), allow_scripts=config.skills.allow_scripts
        )
    return catalog


def _read(path: Path, problems: list[ConfigProblem]) -> str | None:
    # A skill folder may sit where an agent can write: the file is opened beneath its folder's
    # descriptor, not through a link, and must be a regular file with one link.
    try:
        with WorkspaceDir.open(path.parent) as folder, folder.open_read(path.name) as handle:
            return handle.read().decode("utf-8")
    except UnsafeEntry as exc:
        problems.append(ConfigProblem(str(path), "", f"not read: it {exc.reason}"))
    except FileNotFoundError:
        problems.append(ConfigProblem(str(path), "", "file not found"))
    except UnicodeDecodeError:
        problems.append(ConfigProblem(str(path), "", "not UTF-8 text"))
    except OSError as exc:
        problems.append(ConfigProblem(str(path), "", f"cannot read: {exc.strerror}"))
    return None


def _tools(directory: Path, problems: list[ConfigProblem]) -> tuple[SkillToolDef, ...]:
    manifest = directory / MANIFEST_FILE
    if not manifest.exists():
        return ()
    text = _read(manifest, problems)
    if text is None:
        return ()
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(ConfigProblem(str(manifest), "", f"invalid TOML: {exc}"))
        return ()
    tools, found = parse_manifest(raw, file=str(manifest), skill=directory.name)
    problems.extend(found)
    return tools


def _script_problems(directory: Path) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    hint = "skills with scripts are refused unless [skills] allow_scripts = true"
    for root, dirs, files in os.walk(directory):
        for name in sorted(dirs + files):
            path = Path(root) / name
            # os.walk does not enter a linked folder, and a link can be retargeted after
            # this check: refuse every link, whatever it points at now
            if path.is_symlink():
                problems.append(ConfigProblem(str(path), "", f"a symbolic link (it could lead to an executable): {hint}"))
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
        for name in sorted(dirs):
            if name == SCRIPTS_DIR:
                problems.append(ConfigProblem(str(Path(root) / name), "", f"a scripts directory: {hint}"))
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink():
                continue
            try:
                mode = path.stat().st_mode
            except OSError:
                continue  # gone since the walk listed it
            if stat.S_ISREG(mode) and mode & _EXECUTABLE:
                problems.append(ConfigProblem(str(path), "", f"an executable file: {hint}"))
    return problems


def find_skill_dirs(config: Config) -> dict[str, Path]:
    """Return skill name -> directory for every `<dir>/<name>/SKILL.md` under `[skills] dirs`."""
    base = config.source.parent if config.source else Path.cwd()
    found: dict[str, Path] = {}
    for entry in config.skills.dirs:
        root = (base / entry).expanduser()
        if root.is_dir():
            for skill_md in sorted(root.glob("*/SKILL.md")):
                found.setdefault(skill_md.parent.name, skill_md.parent)
    return found
