"""The shipped example skill (examples/skills/notes): its argument pattern keeps `wc` inside the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.errors import ToolFailure
from orchestrator.seam import ConstructionPath, Services, resolve
from orchestrator.tools import Tool
from tests.conftest import WriteConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


def line_count(write_config: WriteConfig) -> tuple[Tool, Path]:
    config = load_config(write_config(f"""
        [providers.p]
        base_url = "http://127.0.0.1:9/v1"

        [skills]
        dirs = ["{EXAMPLES}"]

        [agents.assistant]
        provider = "p"
        model = "m"
        autonomy = "full"
        skills = ["notes"]

        [agents.assistant.shell]
        allowed_commands = ["wc"]
        """))
    execution = resolve(config, "assistant", path=ConstructionPath.CLI_RUN, services=Services())
    tool = execution.tools.get("notes__line_count")
    assert tool is not None
    return tool, execution.security.workspace


async def test_a_note_in_the_workspace_is_counted(write_config: WriteConfig) -> None:
    tool, workspace = line_count(write_config)
    (workspace / "notes").mkdir()
    (workspace / "notes" / "ideas.v2.txt").write_text("one\ntwo\nthree\n")

    result = await tool.invoke({"path": "notes/ideas.v2.txt"})

    assert result.startswith("exit code: 0\n--- stdout ---\n3 notes/ideas.v2.txt\n")


@pytest.mark.parametrize(
    "path",
    ["../x", "/etc/passwd", "notes/../../../../etc/passwd", "notes/..", "./../x", "notes//x", "-", "--files0-from=x"],
)
async def test_paths_outside_the_workspace_are_refused(write_config: WriteConfig, path: str) -> None:
    # the attack: `notes__line_count` is auto-approved in config.example.toml, so a prompt-
    # injected model would use it to probe files anywhere on the host
    tool, _ = line_count(write_config)

    with pytest.raises(ToolFailure) as caught:
        await tool.invoke({"path": path})

    assert caught.value.reason.startswith("argument 'path' refused: ")
