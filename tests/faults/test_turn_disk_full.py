"""A disk that fills while a turn runs, under the real `orchestrator run`: the state dir is a
small tmpfs, filled by the fake model as it receives the turn's request, so the turn's end
(its usage row, its transcript, its reply) meets the full disk. The turn's end waits for space
(up to `reply_deadline_s`, after which the answer goes out anyway and the bookkeeping waits on,
or, with the platform down too, the reply waits for space to enter the delivery queue);
a message that arrives meanwhile is not accepted until space is back; the user gets exactly
one answer per message, every inbox row ends `done`, the usage table has one row per model
call, and the log says so in one warning line (no traceback). Needs root for `mount -t tmpfs`.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import Tally, config_text, fill, settled, small_tmpfs, start, stderr_of

pytestmark = pytest.mark.slow


def _rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    """Read `query` from a state file read-only (the daemon may hold it; the disk may be full)."""
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def _full_lines(log: str) -> list[str]:
    """Return the log's warning and error lines about the full disk."""
    return [line for line in log.splitlines() if ("WARNING" in line or "ERROR" in line) and "full" in line]


async def _wait_for_log(proc: Any, needle: str, *, after: int = 0) -> None:
    """Wait until the daemon's log holds `needle` past its first `after` characters."""
    async with asyncio.timeout(30):
        while needle not in stderr_of(proc)[after:]:
            assert proc.returncode is None, stderr_of(proc)[-3000:]
            await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("deadline_s", "sends_fail"),
    [(120, 0), (1, 0), (1, 6)],
    ids=["space-back-within-the-deadline", "answered-while-full", "queued-while-full"],
)
async def test_a_disk_filled_mid_turn_is_waited_out_and_every_message_answered_once(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path, deadline_s: int, sends_fail: int
) -> None:
    ballast: list[Path] = []

    def fill_then_answer(request: dict[str, Any]) -> Reply:
        if not ballast:  # the first call of the turn: the disk fills while the model "thinks"
            ballast.append(fill(state))
        return echo_model(request)

    fake_llm.default = echo_model
    with small_tmpfs(tmp_path / "state", "4m") as state:
        async with FakeTelegram() as tg:
            daemon = f'state_dir = "{state}"\nshutdown_grace_s = 20\nreply_deadline_s = {deadline_s}\n'
            config = write_config(config_text(fake_llm, tg, daemon=daemon))
            proc = await start(config, log=tmp_path / "daemon.log")
            try:
                sent = ["msg-0"]
                tg.push_message(100, 7, "msg-0")
                await tg.wait_for(lambda: settled(tg, sent), timeout=30)
                fake_llm.default = fill_then_answer
                if sends_fail:  # the platform is down too: past the deadline the reply waits to be queued
                    tg.fail_next("sendMessage", status=500, times=sends_fail)
                sent.append("msg-1")
                tg.push_message(100, 7, "msg-1")
                await _wait_for_log(proc, "is full")  # the turn's end met the full disk
                if sends_fail:
                    await _wait_for_log(proc, "waits in the delivery queue")
                elif deadline_s == 1:  # past the deadline the answer goes out while the disk is still full
                    await tg.wait_for(lambda: settled(tg, sent), timeout=30)
                mark = len(stderr_of(proc))
                sent.append("msg-2")
                tg.push_message(101, 7, "msg-2")  # cannot be stored while the disk is full
                await _wait_for_log(proc, "not accepted", after=mark)
                ballast[0].unlink()
                await tg.wait_for(lambda: settled(tg, sent), timeout=60)
                sessions = state / "sessions.sqlite3"
                await tg.wait_for(
                    lambda: _rows(sessions, "SELECT state FROM inbox WHERE state != 'done'") == [], timeout=30
                )
                await tg.wait_for(
                    lambda: _rows(state / "usage.sqlite3", "SELECT COUNT(*) FROM usage")[0][0] == len(fake_llm.requests),
                    timeout=30,
                )
            finally:
                proc.send_signal(signal.SIGTERM)
                async with asyncio.timeout(60):
                    exit_code = await proc.wait()
            inbox = _rows(state / "sessions.sqlite3", "SELECT event_id, state FROM inbox")
            usage_rows = _rows(state / "usage.sqlite3", "SELECT COUNT(*) FROM usage")[0][0]
    tally = Tally.of(tg, sent)
    log = stderr_of(proc)
    print("\n" + tally.line(f"disk filled mid-turn (reply_deadline_s {deadline_s}, {sends_fail} sends failing)"))
    print(f"model calls {len(fake_llm.requests)}, usage rows {usage_rows}; full-disk lines: {_full_lines(log)}")
    assert exit_code == 0
    assert (tally.answered, tally.noticed, tally.duplicates, tally.lost) == (3, 0, 0, 0)
    assert sorted(state for _, state in inbox) == ["done", "done", "done"]
    assert usage_rows == len(fake_llm.requests) == 3  # none lost, none written twice
    assert len(_full_lines(log)) == 1, log
    assert "Traceback" not in log, log
