"""Skill tools pass the same filters, autonomy, approvals and budgets as every other tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.seam import ConstructionPath, ScopedAssembly, Services, resolve
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.skills.kit import skills_toml, write_kit

NOTES_TOOLS = ("notes__lookup", "notes__nap", "notes__publish", "notes__say")


def names(tmp_path: Path, write_config: WriteConfig, *, extra: str = "", knobs: ScopedAssembly | None = None) -> tuple[str, ...]:
    write_kit(tmp_path)
    config = load_config(write_config(skills_toml("http://127.0.0.1:9/v1", ops_extra=extra)))
    execution = resolve(config, "ops", path=ConstructionPath.LIBRARY, services=Services(), assembly=knobs)
    # excluded or filtered tools never take the skill's instructions with them
    assert [s.name for s in execution.prompt_sections] == ["skill:notes", "skill:docs"]
    return execution.tools.names


@pytest.mark.parametrize(
    ("excluded", "left"),
    [
        ('["notes__say"]', ("list_dir", "notes__lookup", "notes__nap", "notes__publish")),
        ('["notes__*"]', ("list_dir",)),
        ('["notes__p*", "notes__n*"]', ("list_dir", "notes__lookup", "notes__say")),
        ('["*"]', ()),
    ],
)
def test_excluded_tools_subtract_skill_tools(
    excluded: str, left: tuple[str, ...], tmp_path: Path, write_config: WriteConfig
) -> None:
    assert names(tmp_path, write_config, extra=f"excluded_tools = {excluded}") == left


def test_caller_allowed_only_narrows_skill_tools(tmp_path: Path, write_config: WriteConfig) -> None:
    knobs = ScopedAssembly(caller_allowed=frozenset({"notes__l*", "notes__say", "shell", "other__x"}))

    assert names(tmp_path, write_config, knobs=knobs) == ("notes__lookup", "notes__say")


def test_read_only_autonomy_keeps_only_read_only_get_tools(tmp_path: Path, write_config: WriteConfig) -> None:
    extra = 'autonomy = "read_only"'
    write_kit(tmp_path)
    text_ = skills_toml("http://127.0.0.1:9/v1").replace('autonomy = "full"\n', "")
    config = load_config(write_config(text_.replace('skills = ["notes", "docs"]', f'skills = ["notes", "docs"]\n{extra}')))

    execution = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services())

    # shell skill tools and the POST are not read-only; the GET declared read_only is
    assert execution.tools.names == ("list_dir", "notes__lookup")


@pytest.mark.parametrize(
    ("autonomy", "approval", "expected"),
    [
        ("supervised", 'auto_approve = ["notes__say"]', ("ask", "ask", "ask", "allow")),
        ("full", 'always_ask = ["notes__p*"]', ("allow", "allow", "ask", "allow")),
    ],
)
def test_approval_rules_name_skill_tools(
    autonomy: str, approval: str, expected: tuple[str, ...], tmp_path: Path, write_config: WriteConfig
) -> None:
    write_kit(tmp_path)
    text_ = skills_toml(
        "http://127.0.0.1:9/v1", ops_extra=f"[agents.ops.approval]\n{approval}\n"
    ).replace('autonomy = "full"', f'autonomy = "{autonomy}"')
    config = load_config(write_config(text_))
    execution = resolve(config, "ops", path=ConstructionPath.CLI_RUN, services=Services())

    rules = tuple(execution.approvals.rule_for(t.spec).value for n in NOTES_TOOLS if (t := execution.tools.get(n)))

    assert rules == expected


async def test_engine_denies_unapproved_skill_calls_and_times_them_out(
    tmp_path: Path, write_config: WriteConfig, fake_llm: FakeOpenAI, services: Services
) -> None:
    write_kit(tmp_path)
    text_ = skills_toml(
        fake_llm.base_url, ops_extra='[agents.ops.approval]\nauto_approve = ["notes__nap"]\n'
        "[agents.ops.budget]\ntool_timeout_s = 0.3\n",
    ).replace('autonomy = "full"', 'autonomy = "supervised"')
    config = load_config(write_config(text_))
    execution = resolve(config, "ops", path=ConstructionPath.GATEWAY_CHAT, services=services)
    fake_llm.script(
        tool_call("notes__say", {"text": "hello"}),
        tool_call("notes__nap", {"seconds": 5}),
        tool_call("intern__secret", {}),
        text("done"),
    )

    result = await run_tool_call_loop(execution, Transcript(session="s"), "go")

    assert result.text == "done"
    assert result.executed == ("notes__nap",)  # say: no operator on this path; the foreign name never runs
    answers = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "no operator" in answers[0].lower() and "not run" in answers[0].lower()
    assert answers[1] == "Error: 'notes__nap' timed out after 0.3s."
    assert answers[2] == "Error: tool 'intern__secret' is not available to this agent. It was not run."
