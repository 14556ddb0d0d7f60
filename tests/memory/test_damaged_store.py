"""A damaged memory store stops `orchestrator agent` with one line naming the file, as every other store does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import StateError
from orchestrator.memory import MemoryStore
from tests.conftest import WriteConfig, provider_toml
from tests.observability.kit import closed_port

pytestmark = pytest.mark.slow

GARBAGE = b"this is not a database, it is what a bad disk left behind\n" * 200


def _config(write_config: WriteConfig) -> Path:
    return write_config(provider_toml(f"http://127.0.0.1:{closed_port()}/v1") + """
[agents.keeper]
provider = "fake"
model = "m"
memory = { scope = "agent" }
""")


def _agent(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "agent", "keeper", "-m", "remember this", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False, cwd=config.parent,
    )


@pytest.mark.parametrize("store", ["memory.sqlite3", "audit.sqlite3"])
def test_a_garbage_store_file_is_one_line_naming_it_and_exit_1(write_config: WriteConfig, store: str) -> None:
    config = _config(write_config)
    state = config.parent / "state"
    state.mkdir(mode=0o700)
    damaged = state / store
    damaged.write_bytes(GARBAGE)
    damaged.chmod(0o600)
    done = _agent(config)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: cannot open {damaged} (file is not a database); make [daemon] state_dir a directory this user can write"
    ]


def test_the_memory_store_translates_a_damaged_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    path.write_bytes(GARBAGE)
    with pytest.raises(StateError, match=f"cannot open {path} \\(file is not a database\\)"):
        MemoryStore(path)
