"""`orchestrator policy matrix`: the live (setting x path) grid, and its classifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.peripherals import PeripheralPool
from orchestrator.seam import (
    ConstructionPath,
    Services,
    build_cli_run,
    build_gateway_chat,
)
from orchestrator.seam.matrix import (
    SETTINGS,
    MatrixColumn,
    classify,
    parity_matrix,
    settings_of,
)
from tests.conftest import WriteConfig
from tests.parity.conftest import parity_toml

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = [
    "channel", "cli_run", "gateway_chat", "listing", "library", "library+approver",
    "delegate", "sop_step", "acp", "schedule",
]


def test_matrix_on_the_example_config_has_no_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"  # a copy: its state_dir lands in tmp_path
    shutil.copy(ROOT / "config.example.toml", config)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")  # its skill
    assert cli.main(["policy", "matrix", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("agent assistant\n") and "agent researcher\n" in out
    assert out.rstrip().endswith("0 gap(s)") and " gap " not in out
    header = out.splitlines()[1].split()
    assert header == COLUMNS
    assert cli.main(["policy", "matrix", "--json", "--agent", "researcher", "--config", str(config)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert list(grid["agents"]) == ["researcher"] and grid["gaps"] == []
    assert list(grid["agents"]["researcher"]) == list(SETTINGS)


def test_matrix_names_every_declared_knob_on_the_parity_config(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(
        parity_toml("http://127.0.0.1:9/v1")
        + '\n[agents.lead]\nprovider = "fake"\nmodel = "lead-model"\nautonomy = "full"\n'
        'tools = ["delegate"]\ndelegates = ["ops"]\n'
        '\n[[schedules]]\nname = "narrow"\nagent = "ops"\ncron = "0 0 1 1 *"\nprompt = "go"\n'
        'tools = ["file_read", "arm__status", "http_fetch"]\n'
    )
    assert cli.main(["policy", "matrix", "--agent", "ops", "--json", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)["agents"]["ops"]
    not_enforced = {
        (setting, column): verdict
        for setting, row in grid.items()
        for column, verdict in row.items()
        if verdict != "enforced"
    }
    assert not_enforced == {
        ("interactivity", "channel"): "narrowed: interactivity",
        ("interactivity", "library+approver"): "narrowed: interactivity",
        ("interactivity", "acp"): "narrowed: interactivity",
        ("peripherals", "listing"): "narrowed: connect_peripherals",
        ("memory", "acp"): "narrowed: exclude_memory",
        # the lead (ops's caller) has a 60 s tool timeout: ops's 123 s turn is capped (7 iterations < 9 left)
        ("budget.turn_timeout_s", "delegate"): "narrowed: ceiling",
        # the schedule's `tools` keep file_read and arm__status
        ("tools", "schedule"): "narrowed: caller_allowed",
        ("memory", "schedule"): "narrowed: caller_allowed",
        ("peripherals", "schedule"): "narrowed: caller_allowed",
    }


def test_classifier_separates_declared_narrowing_from_gaps() -> None:
    assert classify("tools", ["a", "b"], ["a", "b"], ()) == "enforced"
    assert classify("tools", ["a", "b"], ["a"], {"caller_allowed"}) == "narrowed: caller_allowed"
    # a difference no declared knob of the path explains is a gap
    assert classify("tools", ["a", "b"], ["a"], ()) == "gap"
    assert classify("tools", ["a", "b"], ["a"], {"connect_peripherals"}) == "gap"
    # a knob can only narrow: a wider value is a gap even with the knob declared
    assert classify("tools", ["a"], ["a", "b"], {"caller_allowed"}) == "gap"
    assert classify("budget.max_tool_iterations", 7, 5, {"ceiling"}) == "narrowed: ceiling"
    assert classify("budget.max_tool_iterations", 7, 9, {"ceiling"}) == "gap"
    assert classify("temperature", 0.3, 0.9, {"caller_allowed", "ceiling"}) == "gap"
    assert classify("approval_rules", {"autonomy": "full"}, {"autonomy": "supervised"}, {"interactivity"}) == "gap"
    # interactivity: only a mode the path's profile allows
    assert classify("interactivity", "non_interactive", "channel_prompt", {"interactivity"},
                    path=ConstructionPath.CHANNEL) == "narrowed: interactivity"
    assert classify("interactivity", "non_interactive", "interactive", {"interactivity"},
                    path=ConstructionPath.GATEWAY_CHAT) == "gap"


def test_a_column_resolved_with_another_policy_is_all_gaps(write_config: WriteConfig) -> None:
    """A path that handed the engine the wrong policy shows as gaps (fabricated column, real executions)."""
    config = load_config(write_config(parity_toml("http://127.0.0.1:9/v1")))
    services = Services(peripherals=PeripheralPool())
    baseline = build_cli_run(config, "intern", services)
    wrong = MatrixColumn(label="gateway_chat", execution=build_gateway_chat(config, "ops", services),
                         declared=frozenset())
    only_intern = min(set(wrong.execution.tools.names) - set(baseline.tools.names))
    grid = parity_matrix(baseline, [wrong], [only_intern])
    gaps = sorted(setting for setting, row in grid.items() if row["gateway_chat"] == "gap")
    assert {"tools", "approval_rules", "temperature", "provider_binding", "memory", "budget.max_tool_iterations",
            "prompt_sections"} <= set(gaps)
    # the excluded_tools row watches the registry itself: an excluded tool present is a gap
    assert settings_of(wrong.execution, [only_intern])["excluded_tools"] == [only_intern]
    assert grid["excluded_tools"]["gateway_chat"] == "gap"
    assert cli.main(["policy", "matrix", "--config", str(config.source)]) == 0


def test_policy_keeps_taking_an_agent_and_matrix_is_reserved(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(parity_toml("http://127.0.0.1:9/v1"))
    assert cli.main(["policy", "ops", "--json", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["agent"] == "ops"
    assert cli.main(["policy", "ops", "--agent", "intern", "--config", str(path)]) == 2
    assert "only for `orchestrator policy matrix`" in capsys.readouterr().err
    reserved = write_config(parity_toml("http://127.0.0.1:9/v1") + '\n[agents.matrix]\nprovider = "fake"\nmodel = "m"\n')
    assert cli.main(["policy", "matrix", "--config", str(reserved)]) == 1
    assert "agents.matrix: 'matrix' is a reserved name" in capsys.readouterr().err
