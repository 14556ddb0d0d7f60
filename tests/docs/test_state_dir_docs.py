"""The state dir holds exactly the files the docs list: a real daemon with every part that keeps state.

docs/operations.md (its "Every file" table) and the `daemon.state_dir` row of
docs/configuration.md each name the files; the daemon is run with a gateway, a schedule and an
agent with memory, answers one message, and is stopped: what it left in `state_dir` (less
SQLite's `-wal`/`-shm` companions) must be what both pages name.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import config_text, start, stderr_of

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
STATE_FILE = re.compile(r"`([a-z_]+\.(?:sqlite3|lock)|[a-z_]+(?=/`))/?`")


def operations_files() -> set[str]:
    """The state files docs/operations.md's table under "The state dir" names (first cells)."""
    section = (DOCS / "operations.md").read_text(encoding="utf-8").split("\n## The state dir\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for line in section.splitlines() if line.startswith("| `") for m in [STATE_FILE.match(line[2:])] if m}


def configuration_files() -> set[str]:
    """The state files the `daemon.state_dir` row of docs/configuration.md names."""
    (row,) = [l for l in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines() if l.startswith("| `daemon.state_dir`")]
    return set(STATE_FILE.findall(row))


@pytest.mark.timeout(120)
async def test_the_docs_list_every_file_the_daemon_keeps_in_its_state_dir(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        config = write_config(
            config_text(fake_llm, tg)
            + '[agents.a.memory]\nscope = "agent"\n'
            + "[gateway]\nport = 0\n"
            + '[[schedules]]\nname = "daily"\nagent = "a"\nprompt = "hi"\ninterval_s = 86400\n'
        )
        proc = await start(config)
        fake_llm.script(text("hello back"))
        tg.push_message(5, 5, "hello")
        await tg.wait_for(lambda: any(p["text"] == "hello back" for p in tg.sent), timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0, stderr_of(proc)
    state = config.parent / "state"
    kept = {p.name for p in state.iterdir() if not p.name.endswith(("-wal", "-shm", "-journal"))}
    assert "usage.sqlite3" in kept and "daemon.lock" in kept  # the run did keep state
    assert operations_files() == kept, "docs/operations.md#the-state-dir"
    assert configuration_files() == kept, "docs/configuration.md: daemon.state_dir"
