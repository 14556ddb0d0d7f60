"""The usage table: appended per call, summed per group, read read-only, safe on an existing state dir."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from orchestrator.errors import StateError
from orchestrator.providers import ModelBinding, Prices, Usage
from orchestrator.seam import UsageMeter, budget_key
from orchestrator.store import SessionStore, UsageLog, UsageRow, read_usage

BINDING = ModelBinding(
    provider="fake", kind="openai", base_url="http://127.0.0.1:9/v1", model="m", temperature=None,
    api_key=None, api_key_env=None, base_url_env=None, model_env=None, base_url_from_env=False,
    timeout_s=5.0, max_retries=0, prices=Prices(input=2.0, output=10.0, cached_input=0.5),
)


def row(ts: float, agent: str, sender: str, tokens: tuple[int, int, int], *, model: str = "m") -> UsageRow:
    return UsageRow(
        ts=ts, agent=agent, path="channel", sender=sender, session="s", provider="fake", model=model,
        input_tokens=tokens[0], output_tokens=tokens[1], cached_tokens=tokens[2],
    )


def test_totals_group_filter_and_window(tmp_path: Path) -> None:
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        log.record(row(100.0, "ops", "tg:1", (10, 1, 0)))
        log.record(row(200.0, "ops", "tg:2", (20, 2, 5), model="big"))
        log.record(row(300.0, "pub", "tg:1", (30, 3, 0)))
        by_agent = {t.key: (t.calls, t.input_tokens, t.output_tokens, t.cached_tokens) for t in log.totals()}
        assert by_agent == {"ops": (2, 30, 3, 5), "pub": (1, 30, 3, 0)}
        assert [t.key for t in log.totals(by="sender", agent="ops")] == ["tg:2", "tg:1"]  # biggest first
        assert [t.key for t in log.totals(by="model")] == ["fake/m", "fake/big"]
        assert [t.key for t in log.totals(since=250.0)] == ["pub"]
    # read-only, from another connection, as the CLI reads it while the daemon writes
    assert [t.input_tokens for t in read_usage(tmp_path / "usage.sqlite3", sender="tg:1")] == [30, 10]


def test_read_usage_creates_nothing_and_names_a_bad_file(tmp_path: Path) -> None:
    assert read_usage(tmp_path / "usage.sqlite3") == []
    assert not (tmp_path / "usage.sqlite3").exists()
    (tmp_path / "usage.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StateError, match="usage.sqlite3"):
        read_usage(tmp_path / "usage.sqlite3")


def test_an_existing_state_dir_gains_the_table_and_keeps_its_files(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "sessions.sqlite3") as store:  # a state dir from before usage existed
        store.open_session("k", agent="ops")
    before = (tmp_path / "sessions.sqlite3").read_bytes()
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        log.record(row(1.0, "ops", "-", (1, 1, 0)))
    with UsageLog(tmp_path / "usage.sqlite3") as log:  # opened again: the schema applies twice, rows stay
        assert [t.calls for t in log.totals()] == [1]
    with sqlite3.connect(tmp_path / "usage.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
    assert (tmp_path / "sessions.sqlite3").read_bytes() == before


# The table as version 1 shipped it (no cache-write column), with what a daemon of then wrote.
_V1 = """
CREATE TABLE usage (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, agent TEXT NOT NULL, path TEXT NOT NULL, sender TEXT NOT NULL,
    session TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL DEFAULT 0, cost REAL
);
CREATE INDEX usage_ts ON usage (ts);
CREATE INDEX usage_agent_sender ON usage (agent, sender, ts);
INSERT INTO usage (ts, agent, path, sender, session, provider, model, input_tokens, output_tokens, cached_tokens, cost)
    VALUES (1.0, 'ops', 'channel', 'tg:1', 's', 'claude', 'c', 1000, 10, 400, 0.5);
PRAGMA user_version = 1;
"""


def test_a_version_1_table_is_read_as_is_and_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "usage.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(_V1)
    db.close()
    # `orchestrator usage` before the new daemon ever opened it: read-only, no cache-write column yet
    [old] = read_usage(path)
    assert (old.input_tokens, old.cached_tokens, old.cache_write_tokens, old.cost) == (1000, 400, 0, 0.5)
    with UsageLog(path) as log:  # the daemon starts: the column is added, the old row kept
        log.record(UsageRow(
            ts=2.0, agent="ops", path="channel", sender="tg:1", session="s", provider="claude", model="c",
            input_tokens=3000, output_tokens=20, cached_tokens=0, cache_write_tokens=2500, cost=1.0,
        ))
        [total] = log.totals()
        assert (total.calls, total.input_tokens, total.cache_write_tokens) == (2, 4000, 2500)
        assert total.describe()["cache_write_tokens"] == 2500
    with UsageLog(path) as log:  # opened again: no second ALTER, nothing lost
        assert [t.calls for t in log.totals()] == [2]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
        assert db.execute("SELECT cache_write_tokens FROM usage ORDER BY ts").fetchall() == [(0,), (2500,)]
    db.close()


def test_meter_prices_the_answering_link_and_reads_the_day_back_after_a_restart(tmp_path: Path) -> None:
    now = [1_000_000.0]
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        meter = UsageMeter(log=log, clock=lambda: now[0])
        usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=500_000)
        meter.record(binding=BINDING, provider="fake", model="m", usage=usage, estimated=False,
                     agent="ops", path="channel", sender="tg:1", session="s")
        meter.record(binding=BINDING, provider="other", model="x", usage=Usage(input_tokens=5, output_tokens=5),
                     estimated=True, agent="ops", path="channel", sender="tg:1", session="s")
        [total] = log.totals()
        assert total.cost == pytest.approx(0.5 * 2.0 + 0.5 * 0.5 + 0.1 * 10.0)  # "other" has no prices
        assert total.estimated_calls == 1
        now[0] += 3600
        again = UsageMeter(log=log, clock=lambda: now[0])  # the daemon restarted
        assert again.spent_today(budget_key("ops", "tg:1")) == 1_100_010
        assert again.spent_today(budget_key("ops", "tg:2")) == 0
        now[0] += 24 * 3600  # a day later the window has moved past both calls
        assert again.spent_today(budget_key("ops", "tg:1")) == 0


def test_meter_records_cache_writes_at_their_own_price_and_hands_rows_to_watchers(tmp_path: Path) -> None:
    binding = dataclasses.replace(BINDING, prices=Prices(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75))
    heard: list[UsageRow] = []
    with UsageLog(tmp_path / "usage.sqlite3") as log:
        meter = UsageMeter(log=log)
        remove = meter.watch(heard.append)
        usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=200_000, cache_write_tokens=300_000)
        meter.record(binding=binding, provider="fake", model="m", usage=usage, estimated=False,
                     agent="ops", path="channel", sender="tg:1", session="s")
        remove()
        meter.record(binding=binding, provider="fake", model="m", usage=usage, estimated=False,
                     agent="ops", path="channel", sender="tg:1", session="s")
        totals = log.totals()
    expected = 0.5 * 3.0 + 0.2 * 0.3 + 0.3 * 3.75
    assert [(r.cache_write_tokens, r.cost) for r in heard] == [(300_000, pytest.approx(expected))]
    [total] = totals
    assert (total.calls, total.cache_write_tokens, total.cached_tokens) == (2, 600_000, 400_000)
    assert total.cost == pytest.approx(2 * expected)
