"""What stops `orchestrator run` (or a reload) is one clear line, never a traceback or half a start."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.daemon import reload_config
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running

pytestmark = pytest.mark.slow

BASE = provider_toml("http://127.0.0.1:9/v1") + """
[agents.a]
provider = "fake"
model = "m"

[channels.term]
kind = "terminal"

[[routes]]
channel = "term"
agent = "a"
senders = ["*"]
"""

TELEGRAM = """
[channels.tg]
kind = "telegram"
token = "env:ORCH_TEST_MISSING_TG_TOKEN"
api_base_url = "http://127.0.0.1:9"
"""


def run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )


def test_a_channel_secret_that_does_not_resolve_stops_the_start(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORCH_TEST_MISSING_TG_TOKEN", raising=False)
    config = write_config(BASE + TELEGRAM)
    done = run(config)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"{config}: channels.tg.token: secret 'env:ORCH_TEST_MISSING_TG_TOKEN': "
        "environment variable ORCH_TEST_MISSING_TG_TOKEN is not set"
    ]


def test_a_blank_channel_token_file_stops_the_start(write_config: WriteConfig) -> None:
    config = write_config(BASE + TELEGRAM.replace('"env:ORCH_TEST_MISSING_TG_TOKEN"', '"file:tg.token"'))
    (config.parent / "tg.token").write_text("\n", encoding="utf-8")
    done = run(config)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"{config}: channels.tg.token: secret 'file:tg.token': {config.parent / 'tg.token'} is empty (or only whitespace)"
    ]


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("x" * 31, "the token is 31 characters; use at least 32 (e.g. `openssl rand -hex 32`)"),
        ("   ", "secret 'env:ORCH_TEST_GATEWAY_TOKEN': environment variable ORCH_TEST_GATEWAY_TOKEN is empty"),
        (None, "secret 'env:ORCH_TEST_GATEWAY_TOKEN': environment variable ORCH_TEST_GATEWAY_TOKEN is not set"),
    ],
)
def test_a_short_blank_or_missing_gateway_token_stops_the_start(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, token: str | None, reason: str
) -> None:
    # `check` runs without the daemon's environment; the start checks the token it will use
    monkeypatch.delenv("ORCH_TEST_GATEWAY_TOKEN", raising=False)
    config = write_config(BASE + '\n[gateway]\nlisten = "0.0.0.0"\nport = 0\ntoken = "env:ORCH_TEST_GATEWAY_TOKEN"\n')
    if token is not None:
        monkeypatch.setenv("ORCH_TEST_GATEWAY_TOKEN", token)
    done = run(config)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [f"{config}: gateway.token: {reason}"]


def test_a_gateway_port_in_use_is_one_error_line(write_config: WriteConfig) -> None:
    with socket.socket() as taken:  # raised inside the runtime's TaskGroup: reported all the same
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(write_config(BASE + f"\n[gateway]\nport = {port}\n"))
    assert done.returncode == 1
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: gateway on 127.0.0.1:{port}: ")
    assert "Traceback" not in done.stderr


async def test_a_reload_whose_channel_secret_does_not_resolve_is_rejected(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORCH_TEST_MISSING_TG_TOKEN", raising=False)
    path = write_config(BASE)
    async with running(path) as (runtime, _):
        before = runtime.config
        write_config(BASE.replace('model = "m"', 'model = "m2"') + TELEGRAM)
        assert await reload_config(runtime, path) is False
        assert runtime.config is before and set(runtime.channels) == {"term"}
        write_config(BASE.replace('model = "m"', 'model = "m2"'))  # the same edit without the channel
        assert await reload_config(runtime, path) is True
        assert runtime.config.agents["a"].model == "m2"


def _start_daemon(config: Path) -> subprocess.Popen[str]:
    daemon = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert daemon.stderr is not None
    for line in daemon.stderr:  # the daemon logs to stderr; wait for its ready line
        if "ready:" in line:
            return daemon
    raise AssertionError(f"the daemon exited before ready (code {daemon.wait()})")


NO_CHANNELS = provider_toml("http://127.0.0.1:9/v1") + """
[agents.a]
provider = "fake"
model = "m"
"""


def test_a_second_daemon_on_the_same_state_dir_exits_naming_the_first(write_config: WriteConfig) -> None:
    config = write_config(NO_CHANNELS)
    first = _start_daemon(config)
    try:
        second = run(config)
        assert (second.returncode, second.stdout) == (1, "")
        assert second.stderr.splitlines() == [
            f"error: another orchestrator daemon (pid {first.pid}) is running on "
            f"{config.parent / 'state'}; stop it first, or give this one its own [daemon] state_dir"
        ]
        assert first.poll() is None  # the first one keeps serving
        # A reading command is not a daemon: it still works beside it.
        listing = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "policy", "a", "--config", str(config)],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert listing.returncode == 0, listing.stderr
    finally:
        first.kill()  # kill -9: the kernel drops the lock with the process
        first.wait()
        assert first.stderr is not None
        first.stderr.close()
    again = _start_daemon(config)  # the stale lock file does not block a restart
    again.terminate()
    assert again.wait(timeout=30) == 0
    assert again.stderr is not None
    again.stderr.close()


def test_a_damaged_state_database_is_one_line_naming_it_and_what_to_do(write_config: WriteConfig) -> None:
    import sqlite3

    from orchestrator.store import SessionStore

    config = write_config(NO_CHANNELS)
    state = config.parent / "state"
    with SessionStore(state / "sessions.sqlite3") as store:  # a store with history in it
        for i in range(3000):
            store.accept("tg", str(i), {"text": "x" * 200, "event_id": str(i)})
    with sqlite3.connect(state / "sessions.sqlite3") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(state / "sessions.sqlite3", "r+b") as raw:  # a disk error in an inner page
        raw.seek(4096 * 40)
        raw.write(b"\xde\xad\xbe\xef" * 1024)
    done = run(config)
    path = state / "sessions.sqlite3"
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: {path} is damaged (database disk image is malformed); stop every orchestrator using it, "
        f"then move it aside (a new one is created: its data is lost) or repair it with `sqlite3 {path} .recover`"
    ]
