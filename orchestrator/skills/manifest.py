"""`skill.toml`: the tools a skill declares, validated strictly into `SkillToolDef`s."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from orchestrator.config import dotted
from orchestrator.errors import ConfigProblem
from orchestrator.skills.arguments import ArgType, ArgumentSpec
from orchestrator.skills.templates import ArgvTemplate, UrlTemplate, parse_argv, parse_url

__all__ = ["NAME_PATTERN", "SkillToolDef", "parse_manifest"]

# Skill and tool names: lowercase words joined by single '-' or '_', so `<skill>__<tool>`
# splits unambiguously and stays a valid function name for every provider.
NAME_PATTERN: Final = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_ARGUMENT_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_QUALIFIED_NAME: Final = 64
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ArgumentDecl(_Strict):
    type: ArgType
    description: str = ""
    required: bool = True
    default: StrictBool | StrictInt | StrictStr | None = None
    pattern: str | None = None
    allow_dash: bool = False


class _ToolDecl(_Strict):
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    kind: Literal["shell", "http"]
    argv: tuple[str, ...] | None = None
    method: HttpMethod | None = None
    url: str | None = None
    read_only: bool = False
    arguments: dict[str, _ArgumentDecl] = Field(default_factory=dict)


class _Manifest(_Strict):
    tools: tuple[_ToolDecl, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillToolDef:
    """One validated skill tool: how to run it and which arguments it takes."""

    name: str
    description: str
    kind: Literal["shell", "http"]
    arguments: tuple[ArgumentSpec, ...]
    read_only: bool
    argv: ArgvTemplate | None = None
    method: HttpMethod = "GET"
    url: UrlTemplate | None = None


def parse_manifest(
    raw: Mapping[str, Any], *, file: str, skill: str
) -> tuple[tuple[SkillToolDef, ...], list[ConfigProblem]]:
    """Return the declared tools, or () and one problem per defect (each naming `file`)."""
    try:
        manifest = _Manifest.model_validate(raw)
    except ValidationError as exc:
        return (), [
            ConfigProblem(file, dotted(err["loc"]), _message(err["type"], str(err["msg"])))
            for err in exc.errors(include_url=False)
        ]
    tools: list[SkillToolDef] = []
    problems: list[ConfigProblem] = []
    names: set[str] = set()
    for index, decl in enumerate(manifest.tools):
        base = f"tools[{index}]"
        found = list(_tool_problems(decl, skill))
        if decl.name in names:
            found.append(("name", f"tool {decl.name!r} is declared twice"))
        names.add(decl.name)
        arguments = []
        for arg_name, arg in decl.arguments.items():
            spec, arg_problems = _argument(arg_name, arg)
            found.extend((f"arguments.{arg_name}.{path}".rstrip("."), m) for path, m in arg_problems)
            if spec is not None:
                arguments.append(spec)
        tool, template_problems = _tool(decl, tuple(arguments))
        found.extend(template_problems)
        problems.extend(ConfigProblem(file, f"{base}.{path}", message) for path, message in found)
        if tool is not None and not found:
            tools.append(tool)
    return (tuple(tools), []) if not problems else ((), problems)


def _message(kind: str, msg: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    return msg[:1].lower() + msg[1:]


def _tool_problems(decl: _ToolDecl, skill: str) -> Iterator[tuple[str, str]]:
    if NAME_PATTERN.fullmatch(decl.name) is None:
        yield "name", f"{decl.name!r} must be lowercase letters and digits joined by single '-' or '_'"
    elif len(f"{skill}__{decl.name}") > MAX_QUALIFIED_NAME:
        yield "name", f"'{skill}__{decl.name}' is longer than {MAX_QUALIFIED_NAME} characters"
    if decl.kind == "shell":
        for key, value in (("method", decl.method), ("url", decl.url)):
            if value is not None:
                yield key, "only for kind 'http'"
        if decl.argv is None:
            yield "argv", "required for kind 'shell'"
        if decl.read_only:
            yield "read_only", "shell tools are never read-only (a command can change anything it may touch)"
    else:
        if decl.argv is not None:
            yield "argv", "only for kind 'shell'"
        if decl.url is None:
            yield "url", "required for kind 'http'"
        if decl.read_only and (decl.method or "GET") != "GET":
            yield "read_only", f"only a GET can be read-only, not {decl.method}"


def _argument(name: str, decl: _ArgumentDecl) -> tuple[ArgumentSpec | None, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    if _ARGUMENT_NAME.fullmatch(name) is None:
        problems.append(("", f"argument name {name!r} must be letters, digits and '_'"))
    pattern = None
    if decl.pattern is not None:
        if decl.type != "string":
            problems.append(("pattern", "only string arguments take a pattern"))
        else:
            try:
                pattern = re.compile(decl.pattern)
            except re.error as exc:
                problems.append(("pattern", f"invalid regular expression: {exc}"))
    if decl.required and decl.default is not None:
        problems.append(("default", "a required argument takes no default; set required = false"))
    if not decl.required and decl.default is None:
        problems.append(("default", "an optional argument needs a default"))
    spec = ArgumentSpec(
        name=name,
        type=decl.type,
        description=decl.description,
        required=decl.required,
        default=decl.default,
        pattern=pattern,
        allow_dash=decl.allow_dash,
    )
    if decl.default is not None and not problems:
        refusal = spec.refusal(decl.default)
        if refusal is not None:
            problems.append(("default", refusal))
    return (None if problems else spec), problems


def _tool(
    decl: _ToolDecl, arguments: tuple[ArgumentSpec, ...]
) -> tuple[SkillToolDef | None, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    argv: ArgvTemplate | None = None
    url: UrlTemplate | None = None
    if decl.kind == "shell" and decl.argv is not None:
        argv, problems = parse_argv(decl.argv)
        used = argv.names if argv else frozenset()
    elif decl.kind == "http" and decl.url is not None:
        url, problems = parse_url(decl.url)
        used = url.names if url else frozenset()
    else:
        return None, []
    if problems:
        return None, problems
    declared = set(decl.arguments)
    for name in sorted(used - declared):
        problems.append(("argv" if argv else "url", f"placeholder {{{name}}} names no declared argument"))
    for name in sorted(declared - used):
        problems.append((f"arguments.{name}", "declared but never used in the template"))
    tool = SkillToolDef(
        name=decl.name,
        description=decl.description,
        kind=decl.kind,
        arguments=arguments,
        read_only=decl.read_only,
        argv=argv,
        method=decl.method or "GET",
        url=url,
    )
    return (None if problems else tool), problems
