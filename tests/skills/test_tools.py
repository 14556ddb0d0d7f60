"""Skill tools run under the agent's SecurityPolicy, and no argument can inject into argv or a URL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from orchestrator.checks import load_config
from orchestrator.errors import ConfigError, ToolFailure
from orchestrator.seam import ConstructionPath, Services, resolve
from orchestrator.tools import Tool
from tests.conftest import WriteConfig
from tests.fakes.loopback import serving
from tests.skills.kit import DOCS_MD, NOTES_MD, skills_toml, write_kit, write_skill

INJECTION_MANIFEST = """
[[tools]]
name = "show"
description = "Show a count of lines from a file."
kind = "shell"
argv = ["printf", "<%s>", "-n", "{count}", "{file}", "{offset}", "{{literal}}"]
[tools.arguments.count]
type = "integer"
[tools.arguments.file]
type = "string"
pattern = "[a-z]+[.]txt"
[tools.arguments.offset]
type = "integer"
required = false
default = 0
allow_dash = true
"""


def tool_of(tmp_path: Path, write_config: WriteConfig, name: str, *, extra: str = "", agent: str = "ops") -> Tool:
    config = load_config(write_config(skills_toml("http://127.0.0.1:9/v1", ops_extra=extra)))
    tool = resolve(config, agent, path=ConstructionPath.CLI_RUN, services=Services()).tools.get(name)
    assert tool is not None, name
    return tool


async def refused(tool: Tool, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolFailure) as caught:
        await tool.invoke(arguments)
    assert caught.value.tool == tool.spec.name
    return caught.value.reason


async def test_shell_skill_tool_runs_the_template_in_the_workspace(tmp_path: Path, write_config: WriteConfig) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "notes", NOTES_MD, INJECTION_MANIFEST)
    write_skill(skills, "docs", DOCS_MD)
    show = tool_of(tmp_path, write_config, "notes__show")

    result = await show.invoke({"count": 3, "file": "a.txt"})

    # every value is exactly one argv element; "{{literal}}" is the literal "{literal}"
    assert result == "exit code: 0\n--- stdout ---\n<-n><3><a.txt><0><{literal}>\n--- stderr ---\n"


async def test_workspace_and_command_allowlist_apply_to_skill_tools(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    manifest = '[[tools]]\nname = "where"\ndescription = "d"\nkind = "shell"\nargv = ["pwd"]\n'
    write_skill(tmp_path / "skills", "notes", NOTES_MD, manifest)
    write_skill(tmp_path / "skills", "docs", DOCS_MD)
    config_text = skills_toml("http://127.0.0.1:9/v1").replace(
        '[agents.ops.shell]\nallowed_commands = ["printf", "sleep"]',
        f'workspace = "{tmp_path / "ws"}"\n[agents.ops.shell]\nallowed_commands = ["printf", "sleep"]',
    )
    # the config check refuses a skill tool its agent could never run ...
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(config_text))
    assert [p.message for p in caught.value.problems] == [
        "skill tool notes__where runs 'pwd', which [shell] allowed_commands does not list: "
        "allow it, or add 'notes__where' to excluded_tools"
    ]
    config = load_config(write_config(config_text.replace('["printf", "sleep"]', '["pwd"]')))
    where = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services()).tools.get("notes__where")
    assert where is not None
    assert await where.invoke({}) == f"exit code: 0\n--- stdout ---\n{(tmp_path / 'ws').resolve()}\n\n--- stderr ---\n"

    # ... and a config that skipped the check (built in code) is still refused at the call
    ops = config.agents["ops"]
    narrowed = ops.model_copy(update={"shell": ops.shell.model_copy(update={"allowed_commands": ("printf", "sleep")})})
    config = config.model_copy(update={"agents": {**config.agents, "ops": narrowed}})
    where = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services()).tools.get("notes__where")
    assert where is not None
    assert await refused(where, {}) == "command 'pwd' refused; allowed commands: printf, sleep"


def test_a_skill_tool_the_agent_excludes_needs_no_shell_allowance(tmp_path: Path, write_config: WriteConfig) -> None:
    manifest = '[[tools]]\nname = "where"\ndescription = "d"\nkind = "shell"\nargv = ["pwd"]\n'
    write_skill(tmp_path / "skills", "notes", NOTES_MD, manifest)
    write_skill(tmp_path / "skills", "docs", DOCS_MD)
    config = load_config(write_config(skills_toml("http://127.0.0.1:9/v1", ops_extra='excluded_tools = ["notes__*"]')))
    execution = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services())
    assert "notes__where" not in execution.tools.names and execution.skills == ("notes", "docs")


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"count": 3, "file": "-rf"}, "argument 'file' refused: '-rf' starts with '-' (it could be read as an option)"),
        ({"count": -3, "file": "a.txt"}, "argument 'count' refused: '-3' starts with '-' (it could be read as an option)"),
        ({"count": 3, "file": "a.txt\n--exec"}, "argument 'file' refused: contains a newline"),
        ({"count": 3, "file": "a.txt\r"}, "argument 'file' refused: contains a carriage return"),
        ({"count": 3, "file": "a\x00.txt"}, "argument 'file' refused: contains a NUL character"),
        ({"count": 3, "file": "../etc/passwd"},
         "argument 'file' refused: '../etc/passwd' does not match the pattern '[a-z]+[.]txt'"),
        ({"count": 3, "file": "a.txt extra.txt"},
         "argument 'file' refused: 'a.txt extra.txt' does not match the pattern '[a-z]+[.]txt'"),
        ({"count": "3; rm -rf /", "file": "a.txt"}, "argument 'count' refused: must be an integer, not a string"),
        ({"count": True, "file": "a.txt"}, "argument 'count' refused: must be an integer, not a boolean"),
        ({"count": 3, "file": ["a.txt", "-x"]}, "argument 'file' refused: must be a string, not an array or object"),
        ({"count": 3}, "missing required argument 'file'"),
        ({"count": 3, "file": "a.txt", "argv": ["sh"]}, "unexpected argument(s): argv"),
    ],
)
async def test_injection_is_refused_before_anything_runs(
    arguments: dict[str, Any], reason: str, tmp_path: Path, write_config: WriteConfig
) -> None:
    write_skill(tmp_path / "skills", "notes", NOTES_MD, INJECTION_MANIFEST)
    write_skill(tmp_path / "skills", "docs", DOCS_MD)
    show = tool_of(tmp_path, write_config, "notes__show")

    assert await refused(show, arguments) == reason


async def test_allow_dash_admits_a_leading_dash(tmp_path: Path, write_config: WriteConfig) -> None:
    write_skill(tmp_path / "skills", "notes", NOTES_MD, INJECTION_MANIFEST)
    write_skill(tmp_path / "skills", "docs", DOCS_MD)
    show = tool_of(tmp_path, write_config, "notes__show")

    result = await show.invoke({"count": 1, "file": "b.txt", "offset": -2})

    assert "<-n><1><b.txt><-2><{literal}>" in result


async def test_denied_args_refuse_the_builtin_shell_and_skill_tools_alike(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    write_skill(tmp_path / "skills", "notes", NOTES_MD, INJECTION_MANIFEST)
    write_skill(tmp_path / "skills", "docs", DOCS_MD)
    text = skills_toml("http://127.0.0.1:9/v1", ops_extra='tools = ["shell"]').replace(
        'tools = ["list_dir"]\n', ""
    ).replace('allowed_commands = ["printf", "sleep"]', 'allowed_commands = ["printf", "sh"]\ndenied_args = ["--exec*", "-c", "<*"]')
    # the skill template's own literal "<%s>" matches "<*": the config check says so ...
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text))
    assert [p.message for p in caught.value.problems] == [
        "skill tool notes__show has argv[1] '<%s>', which [shell] denied_args refuses ('<*'): it could never run"
    ]
    # ... and a config that skipped the check (built in code) refuses the whole tool at the call
    config = load_config(write_config(text.replace(', "<*"]', "]")))
    ops = config.agents["ops"]
    denied = ops.shell.model_copy(update={"denied_args": (*ops.shell.denied_args, "<*")})
    config = config.model_copy(update={"agents": {**config.agents, "ops": ops.model_copy(update={"shell": denied})}})
    execution = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services())
    shell, show = execution.tools.get("shell"), execution.tools.get("notes__show")
    assert shell is not None and show is not None

    assert await refused(shell, {"argv": ["sh", "-c", "id"]}) == "argv[1] '-c' refused: it matches denied argument '-c'"
    assert await refused(shell, {"argv": ["printf", "%s", "--exec=rm"]}) == (
        "argv[2] '--exec=rm' refused: it matches denied argument '--exec*'"
    )
    assert await refused(show, {"count": 1, "file": "a.txt"}) == "argv[1] '<%s>' refused: it matches denied argument '<*'"
    assert (await shell.invoke({"argv": ["printf", "%s", "fine"]})).startswith("exit code: 0\n--- stdout ---\nfine")


@pytest.fixture
async def notes_server() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    """A loopback HTTP server recording (method, raw path) of every request."""
    seen: list[tuple[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        return web.Response(text="note body", content_type="text/plain")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    async with serving(app) as origin:
        yield origin, seen


async def test_http_skill_tool_passes_the_private_address_guard(
    tmp_path: Path, write_config: WriteConfig, notes_server: tuple[str, list[tuple[str, str]]]
) -> None:
    base, seen = notes_server
    write_kit(tmp_path, lookup_base=base)
    lookup = tool_of(tmp_path, write_config, "notes__lookup", extra='[agents.ops.http_fetch]\nallowed_hosts = ["*"]\n')

    reason = await refused(lookup, {"id": "7"})

    assert reason == f"refused '{base}/notes/7?q=all': 127.0.0.1 resolves to non-public address 127.0.0.1"
    assert seen == []


async def test_http_skill_tool_without_allowed_hosts_reaches_no_host(
    tmp_path: Path, write_config: WriteConfig, notes_server: tuple[str, list[tuple[str, str]]]
) -> None:
    base, seen = notes_server
    write_kit(tmp_path, lookup_base=base)
    lookup = tool_of(tmp_path, write_config, "notes__lookup", extra="[agents.ops.http_fetch]\nallow_private_addresses = true\n")

    reason = await refused(lookup, {"id": "7"})

    assert reason == f"refused '{base}/notes/7?q=all': no host is allowed ([agents.ops.http_fetch] allowed_hosts is empty)"
    assert seen == []


async def test_http_skill_tool_encodes_values_and_honours_allowed_hosts(
    tmp_path: Path, write_config: WriteConfig, notes_server: tuple[str, list[tuple[str, str]]]
) -> None:
    base, seen = notes_server
    write_kit(tmp_path, lookup_base=base)
    private = '[agents.ops.http_fetch]\nallow_private_addresses = true\nallowed_hosts = ["127.0.0.1"]\n'
    lookup = tool_of(tmp_path, write_config, "notes__lookup", extra=private)
    publish = tool_of(tmp_path, write_config, "notes__publish", extra=private)

    result = await lookup.invoke({"id": "a/../b c", "query": "x&admin=1#frag"})
    await publish.invoke({"id": "n1"})

    assert result == "HTTP 200\ntext/plain; charset=utf-8\n\nnote body"
    assert seen == [
        ("GET", "/notes/a%2F..%2Fb%20c?q=x%26admin%3D1%23frag"),
        ("POST", "/notes/n1/publish"),
    ]
    assert await refused(lookup, {"id": ".."}) == "argument 'id' refused: '..' is not allowed in the URL path"
    hosts = '[agents.ops.http_fetch]\nallow_private_addresses = true\nallowed_hosts = ["api.example.com"]\n'
    fenced = tool_of(tmp_path, write_config, "notes__lookup", extra=hosts)
    assert await refused(fenced, {"id": "1"}) == (
        f"refused '{base}/notes/1?q=all': host '127.0.0.1' is not in the allowed hosts (api.example.com)"
    )
    assert len(seen) == 2
