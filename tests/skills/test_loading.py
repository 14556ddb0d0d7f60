"""Loading skills: the prompt section, strict SKILL.md and skill.toml errors, scripts, once per generation."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.errors import ConfigError
from orchestrator.seam import ConstructionPath, Services, resolve
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.skills.kit import DOCS_MD, NOTES_MD, skills_toml, write_kit, write_skill

CONFIG = skills_toml("http://127.0.0.1:9/v1")


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(["check", "--config", str(path)])
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).strip().splitlines()


async def test_skill_gives_a_prompt_section_and_namespaced_tools(tmp_path: Path, write_config: WriteConfig) -> None:
    write_kit(tmp_path)
    config = load_config(write_config(CONFIG))

    execution = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services())

    assert execution.tools.names == ("list_dir", "notes__lookup", "notes__nap", "notes__publish", "notes__say")
    assert [s.name for s in execution.prompt_sections] == ["skill:notes", "skill:docs"]
    assert execution.system_prompt == (
        "You are ops.\n\n## Skill: notes\nKeep and look up short notes.\n"
        "Tools of this skill (when granted to you): notes__say, notes__nap, notes__lookup, notes__publish\n\n"
        "Call notes__say to repeat a note back; notes__lookup finds a note by id.\n\n"
        "## Skill: docs\nHouse style for answers.\n\nAnswer in one short paragraph."
    )
    say = execution.tools.get("notes__say")
    assert say is not None
    assert say.spec.source.value == "skill" and not say.spec.read_only
    assert say.spec.openai_spec()["function"]["parameters"] == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The note.", "pattern": "[A-Za-z0-9 ,.:=/-]*"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    lookup = execution.tools.get("notes__lookup")
    assert lookup is not None and lookup.spec.read_only and lookup.spec.untrusted_output
    assert lookup.spec.openai_spec()["function"]["parameters"]["required"] == ["id"]


async def test_the_provider_receives_the_skill_prompt_and_tools(
    tmp_path: Path, write_config: WriteConfig, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    write_kit(tmp_path)
    path = write_config(skills_toml(fake_llm.base_url))
    fake_llm.script(text("noted"))

    code = await asyncio.to_thread(cli.main, ["agent", "ops", "-m", "hi", "--config", str(path)])

    assert (code, capsys.readouterr().out) == (0, "noted\n")
    request = fake_llm.requests[0]
    system = request["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are ops.\n\n## Skill: notes\n")
    assert "Call notes__say to repeat a note back" in system["content"]
    assert "## Skill: docs\nHouse style for answers." in system["content"]
    assert [t["function"]["name"] for t in request["tools"]] == [
        "list_dir", "notes__lookup", "notes__nap", "notes__publish", "notes__say",
    ]


@pytest.mark.parametrize(
    ("skill_md", "line"),
    [
        ("name: notes\n", "line 1: SKILL.md must start with a '---' front matter line"),
        ("---\nname: notes\ndescription: d\n", "line 1: the front matter is not closed by a '---' line"),
        ("---\nname notes\ndescription: d\n---\n", "line 2: expected 'key: value', got 'name notes'"),
        ("---\nname: notes\ndescription: d\nlicense: MIT\n---\n",
         "line 4: unknown front matter key 'license'; expected: name, description"),
        ("---\nname: notes\n---\nbody\n", "description: missing from the front matter"),
        ("---\nname: notes\ndescription: |\n  two\n  lines\n---\n",
         "line 3: description: a value starting with '|' must be quoted"),
        ("---\nname: notes\ndescription: use it: now\n---\n",
         "line 3: description: a value containing ' #' or ': ' must be quoted"),
        ("---\nname: notes\ndescription: \"open\n---\n", "line 3: description: unterminated \" quote"),
        ("---\nname: notes\nname: notes\ndescription: d\n---\n", "line 3: 'name' is given twice"),
        ("---\nname: other\ndescription: d\n---\n", "name: 'other' must equal the skill's directory name 'notes'"),
    ],
)
def test_malformed_skill_md_is_one_error_line_naming_the_file(
    skill_md: str, line: str, tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = write_kit(tmp_path)
    (skills / "notes" / "SKILL.md").write_text(skill_md, encoding="utf-8")
    path = write_config(CONFIG)

    code, lines = check(path, capsys)

    assert code == 1
    assert lines == [f"{skills / 'notes' / 'SKILL.md'}: {line}"]


@pytest.mark.parametrize(
    ("manifest", "line"),
    [
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo", "--n={n}"]\n'
         '[tools.arguments.n]\ntype = "integer"\n',
         "tools[0].argv[1]: '--n={n}': a placeholder must be a whole argv element like \"{name}\" "
         "(write {{ and }} for literal braces)"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["{cmd}"]\n'
         '[tools.arguments.cmd]\ntype = "string"\n',
         "tools[0].argv[0]: the command must be literal, not a placeholder"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo", "{n}"]\n',
         "tools[0].argv: placeholder {n} names no declared argument"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo"]\n'
         '[tools.arguments.n]\ntype = "integer"\n',
         "tools[0].arguments.n: declared but never used in the template"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo"]\nread_only = true\n',
         "tools[0].read_only: shell tools are never read-only (a command can change anything it may touch)"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "http"\nmethod = "POST"\n'
         'url = "https://example.com/"\nread_only = true\n',
         "tools[0].read_only: only a GET can be read-only, not POST"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "http"\nurl = "https://{host}/"\n'
         '[tools.arguments.host]\ntype = "string"\n',
         "tools[0].url: placeholders may not be in the host; only in the path and query"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo", "{n}"]\n'
         '[tools.arguments.n]\ntype = "string"\nrequired = false\n',
         "tools[0].arguments.n.default: an optional argument needs a default"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo", "{n}"]\n'
         '[tools.arguments.n]\ntype = "string"\npattern = "(["\n',
         "tools[0].arguments.n.pattern: invalid regular expression: "
         "unterminated character set at position 1"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo", "{n}"]\n'
         '[tools.arguments.n]\ntype = "string"\nrequired = false\ndefault = "-rf"\n',
         "tools[0].arguments.n.default: '-rf' starts with '-' (it could be read as an option)"),
        ('[[tools]]\nname = "Bad__Name"\ndescription = "d"\nkind = "shell"\nargv = ["echo"]\n',
         "tools[0].name: 'Bad__Name' must be lowercase letters and digits joined by single '-' or '_'"),
        ('[[tools]]\nname = "x"\ndescription = "d"\nkind = "shell"\nargv = ["echo"]\ntimeout = 3\n',
         "tools[0].timeout: unknown key"),
        ('[[tools]]\nname = "x"\ndescription = "d"\n', "tools[0].kind: missing required key"),
        ("[[tools]\n", "invalid TOML: Expected ']]' at the end of an array declaration (at line 1, column 8)"),
    ],
)
def test_malformed_skill_toml_names_the_file_and_key(
    manifest: str, line: str, tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "notes", NOTES_MD, manifest)
    write_skill(skills, "docs", DOCS_MD)
    path = write_config(CONFIG)

    code, lines = check(path, capsys)

    assert code == 1
    manifest_file = skills / "notes" / "skill.toml"
    assert lines == [f"{manifest_file}: {line}"]


@pytest.mark.parametrize("kind", ["executable", "scripts_dir"])
def test_scripts_are_refused_unless_allowed(
    kind: str, tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = write_kit(tmp_path)
    if kind == "executable":
        script = skills / "notes" / "tool.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        script.chmod(0o755)
        expected = f"{script}: an executable file"
    else:
        script = skills / "notes" / "scripts"
        script.mkdir()
        (script / "README").write_text("not executable\n")
        expected = f"{script}: a scripts directory"
    path = write_config(CONFIG)

    code, lines = check(path, capsys)

    assert code == 1
    assert lines == [f"{expected}: skills with scripts are refused unless [skills] allow_scripts = true"]
    assert cli.main(["run", "--config", str(path)]) == 1  # the daemon refuses to start too
    capsys.readouterr()
    allowed = write_config(CONFIG.replace('dirs = ["skills"]', 'dirs = ["skills"]\nallow_scripts = true'))
    assert check(allowed, capsys) == (
        0, [f"{allowed}: ok (2 agents, 1 providers, 0 channels, 0 routes)", "agent ops: shell sandbox bwrap (network off)"]
    )


@pytest.mark.parametrize("target", ["folder", "file", "dangling"])
def test_symlinks_in_a_skill_are_refused_unless_scripts_are_allowed(
    target: str, tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # the attack: the executable lives outside the skill, reached through a linked folder
    # (os.walk never enters it) or a linked file (retargetable after the check)
    skills = write_kit(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    tool = outside / "tool.sh"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    link = skills / "notes" / "lib"
    link.symlink_to({"folder": outside, "file": tool, "dangling": tmp_path / "gone"}[target])
    path = write_config(CONFIG)

    code, lines = check(path, capsys)

    assert code == 1
    assert lines == [
        f"{link}: a symbolic link (it could lead to an executable): skills with scripts are refused "
        "unless [skills] allow_scripts = true"
    ]
    allowed = write_config(CONFIG.replace('dirs = ["skills"]', 'dirs = ["skills"]\nallow_scripts = true'))
    assert check(allowed, capsys) == (
        0, [f"{allowed}: ok (2 agents, 1 providers, 0 channels, 0 routes)", "agent ops: shell sandbox bwrap (network off)"]
    )


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_a_skill_file_that_is_a_link_is_never_read_even_with_scripts_allowed(
    how: str, tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # a skills folder an agent can write: SKILL.md swapped for a link to a file outside
    skills = write_kit(tmp_path)
    skill_md = skills / "notes" / "SKILL.md"
    outside = tmp_path / "outside-SKILL.md"
    outside.write_bytes(skill_md.read_bytes())
    skill_md.unlink()
    if how == "symlink":
        skill_md.symlink_to(outside)
    else:
        skill_md.hardlink_to(outside)
    allowed = write_config(CONFIG.replace('dirs = ["skills"]', 'dirs = ["skills"]\nallow_scripts = true'))

    code, lines = check(allowed, capsys)

    assert code == 1
    why = "goes through a symbolic link" if how == "symlink" else "has 2 hard links (it may be a file outside the workspace)"
    assert lines == [f"{skill_md}: not read: it {why}"]


def test_skill_tool_names_in_policy_lists_must_exist(
    tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_kit(tmp_path)
    path = write_config(skills_toml(
        "http://127.0.0.1:9/v1",
        ops_extra='excluded_tools = ["notes__sya", "notes__*", "docs__x"]\n'
        '[agents.ops.approval]\nalways_ask = ["notes__publish"]\n',
    ))

    code, lines = check(path, capsys)

    assert code == 1
    assert lines == [
        f"{path}: agents.ops.excluded_tools[0]: skill 'notes' declares no tool 'sya' (did you mean 'say'?)",
        f"{path}: agents.ops.excluded_tools[2]: skill 'docs' declares no tool 'x'",
    ]


def test_a_skill_named_like_an_mcp_server_is_refused(
    tmp_path: Path, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_kit(tmp_path)
    path = write_config(CONFIG + '\n[mcp.servers.notes]\ntransport = "http"\nurl = "http://127.0.0.1:9/mcp"\n')

    code, lines = check(path, capsys)

    assert code == 1
    assert lines == [f"{path}: skills.dirs: skill 'notes' has the name of a MCP server; their tool names would collide"]


async def test_skill_files_are_read_once_per_config_generation(
    tmp_path: Path, write_config: WriteConfig, services: Services
) -> None:
    skills = write_kit(tmp_path)
    path = write_config(CONFIG)
    config = load_config(path)
    shutil.rmtree(skills)  # everything after the config check uses what it loaded

    for route in ConstructionPath:
        execution = resolve(config, "ops", path=route, services=services)
        assert "notes__say" in execution.tools
        assert "Call notes__say" in execution.system_prompt
    say = resolve(config, "ops", path=ConstructionPath.CHANNEL, services=services).tools.get("notes__say")
    assert say is not None
    assert await say.invoke({"text": "still here"}) == "exit code: 0\n--- stdout ---\n[still here]\n--- stderr ---\n"
    with pytest.raises(ConfigError) as caught:  # a new generation reads the directory again
        load_config(path)
    assert "unknown skill 'notes'" in str(caught.value)


def test_an_agent_without_the_skill_gets_neither_section_nor_tools(tmp_path: Path, write_config: WriteConfig) -> None:
    write_kit(tmp_path)
    config = load_config(write_config(CONFIG.replace('skills = ["docs"]', "")))

    intern = resolve(config, "intern", path=ConstructionPath.CLI_RUN, services=Services())

    assert intern.tools.names == ()
    assert intern.prompt_sections == ()
    assert intern.system_prompt == "You are the intern."
