"""`orchestrator usage`: text and JSON, filters and windows, over a usage table written as the daemon writes it."""

from __future__ import annotations

import json
import time

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.store import UsageLog, UsageRow
from tests.conftest import WriteConfig

CONFIG = '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.ops]\nprovider = "p"\nmodel = "m"\n'


def record(log: UsageLog, *, age_s: float, agent: str, sender: str, tokens: tuple[int, int, int],
           cost: float | None = None, estimated: bool = False, written: int = 0) -> None:
    log.record(UsageRow(
        ts=time.time() - age_s, agent=agent, path="channel", sender=sender, session="s", provider="p", model="m",
        input_tokens=tokens[0], output_tokens=tokens[1], cached_tokens=tokens[2], cache_write_tokens=written,
        cost=cost, estimated=estimated,
    ))


def test_usage_prints_a_table_and_json(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(CONFIG)
    with UsageLog(load_config(path).state_path() / "usage.sqlite3") as log:
        record(log, age_s=60, agent="ops", sender="tg:1", tokens=(1000, 100, 800), cost=0.25)
        record(log, age_s=120, agent="ops", sender="tg:2", tokens=(500, 50, 0), cost=0.5, written=300)
        record(log, age_s=180, agent="pub", sender="tg:1", tokens=(40, 2, 0), estimated=True)
        record(log, age_s=30 * 86400, agent="old", sender="tg:1", tokens=(9, 9, 0))  # outside the default 7d

    assert cli.main(["usage", "--config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("usage since ") and lines[0].endswith(", by agent")
    assert [line.split() for line in lines[1:]] == [
        ["agent", "calls", "input", "cached", "cache_write", "output", "total", "cost"],
        ["ops", "2", "1500", "800", "300", "150", "1650", "0.7500"],
        ["pub", "(1", "estimated)", "1", "40", "0", "0", "2", "42", "-"],
        ["total", "(1", "estimated)", "3", "1540", "800", "300", "152", "1692", "0.7500"],
    ]

    assert cli.main(["usage", "--by", "sender", "--agent", "ops", "--since", "all", "--json", "--config", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["by"], report["agent"], report["since"]) == ("sender", "ops", None)
    assert [(r["key"], r["total_tokens"], r["cache_write_tokens"], r["cost"]) for r in report["rows"]] == [
        ("tg:1", 1100, 0, 0.25), ("tg:2", 550, 300, 0.5)
    ]

    assert cli.main(["usage", "--sender", "tg:1", "--since", "all", "--by", "model", "--json", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["calls"] == 3


def test_usage_with_nothing_recorded_and_a_bad_window(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(CONFIG)
    assert cli.main(["usage", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "no model calls recorded"
    assert not (load_config(path).state_path() / "usage.sqlite3").exists()  # read-only: nothing created
    assert cli.main(["usage", "--since", "yesterday", "--config", str(path)]) == 1
    assert capsys.readouterr().err.strip() == "error: --since 'yesterday': expected a span like 30m, 12h, 7d, 2w, or all"
