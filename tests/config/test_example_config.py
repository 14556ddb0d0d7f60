"""config.example.toml as shipped: its skill tool and its SOP work against the fake LLM."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator import cli
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def example(tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example config and its skills, copied so its ./state lands in tmp_path."""
    shutil.copy(ROOT / "config.example.toml", tmp_path / "config.toml")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.setenv("ORCHESTRATOR_BASE_URL", fake_llm.base_url)
    monkeypatch.delenv("ORCHESTRATOR_MODEL", raising=False)
    return tmp_path / "config.toml"


def tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools", []))


async def test_the_example_skill_tool_runs_wc_in_the_workspace(
    example: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = example.parent / "state-workspaces" / "assistant" / "notes"
    notes.mkdir(parents=True)
    (notes / "ideas.txt").write_text("one\ntwo\nthree\n")
    fake_llm.script(tool_call("notes__line_count", {"path": "notes/ideas.txt"}), text("Your ideas note has 3 lines."))
    argv = ["agent", "assistant", "-m", "how long is my ideas note?", "--config", str(example)]
    code = await asyncio.to_thread(cli.main, argv)
    assert code == 0
    assert "Your ideas note has 3 lines." in capsys.readouterr().out
    first, second = fake_llm.requests
    assert tool_names(first) == ["file_read", "file_write", "list_dir", "notes__line_count"]
    assert "Notes live as plain text files" in first["messages"][0]["content"]  # the skill's prompt section
    result = second["messages"][-1]
    assert result["role"] == "tool" and "3 notes/ideas.txt" in result["content"]


async def test_the_example_sop_narrows_its_first_step_and_runs_the_second_as_assistant(
    example: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.script(text("found: README"), text("A five-line summary."))
    code = await asyncio.to_thread(cli.main, ["sop", "review", "-m", "the docs", "--config", str(example)])
    assert (code, capsys.readouterr().out) == (0, "A five-line summary.\n")
    survey, summary = fake_llm.requests
    assert tool_names(survey) == ["file_read", "list_dir"]  # researcher's grant, narrowed by the step
    assert "tools" not in summary or tool_names(summary) == []  # tools = []: none at all
    assert summary["messages"][0]["content"].startswith("You are a concise assistant.")


async def test_the_example_route_grants_sop_review_in_the_chat(example: Path, fake_llm: FakeOpenAI) -> None:
    from tests.daemon.harness import running

    fake_llm.script(text("found: README"), text("A five-line summary."))
    async with running(example) as (_, terms):
        terms["terminal"].type("/sop review the docs")
        await terms["terminal"].screen.wait_for(lambda lines: "A five-line summary." in lines)
    survey, summary = fake_llm.requests
    assert tool_names(survey) == ["file_read", "list_dir"]
    assert survey["messages"][-1]["content"].endswith("the docs")
