"""A Telegram `webhook_secret` Telegram would refuse (it takes 1-256 of A-Z a-z 0-9 _ -) is refused with
its file and dotted key: by `check` where the secret can be read, else by `orchestrator run` at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import cli
from tests.conftest import WriteConfig, provider_toml
from tests.fakes.telegram_api import DEFAULT_TOKEN

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONFIG = provider_toml("http://127.0.0.1:9/v1") + """
[agents.a]
provider = "fake"
model = "m"

[channels.tg]
kind = "telegram"
token = "file:tg.token"
api_base_url = "http://127.0.0.1:9"
webhook_secret = "{secret}"

[[routes]]
channel = "tg"
agent = "a"
senders = ["*"]
"""
def _token_file(path: Path, value: str = DEFAULT_TOKEN) -> None:
    """Write a secret file as `orchestrator init` does: 0600 (`check` refuses one others can read)."""
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)


ALLOWED = "Telegram takes 1-256 characters of A-Z, a-z, 0-9, '_' and '-' as a webhook secret"


def test_check_refuses_a_webhook_secret_outside_telegrams_alphabet(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(CONFIG.format(secret="file:hook.secret"))
    _token_file(config.parent / "tg.token")
    found = []
    for value in ("not allowed!", "x" * 257, "Fine_value-256"):
        _token_file(config.parent / "hook.secret", value)
        code = cli.main(["check", "--config", str(config)])
        found.append((code, capsys.readouterr().err.splitlines()))
    assert found == [
        (1, [f"{config}: channels.tg.webhook_secret: {ALLOWED}; this one has other characters"]),
        (1, [f"{config}: channels.tg.webhook_secret: {ALLOWED}; this one has 257 characters"]),
        (0, []),
    ]
    monkeypatch.setenv("ORCH_TEST_HOOK_SECRET", "tab\tinside")  # an `env:` set here is read here too
    config = write_config(CONFIG.format(secret="env:ORCH_TEST_HOOK_SECRET"))
    assert cli.main(["check", "--config", str(config)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{config}: channels.tg.webhook_secret: {ALLOWED}; this one has other characters"
    ]
    assert "tab" not in capsys.readouterr().err  # never the value


def test_a_webhook_secret_only_the_daemon_can_read_is_checked_when_it_starts(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # systemd's LoadCredential: the secret is there for the daemon, not for the admin's `check`
    config = write_config(CONFIG.format(secret="file:$CREDENTIALS_DIRECTORY/hook"))
    _token_file(config.parent / "tg.token")
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "hook").write_text("a secret with spaces\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    checked = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "check", "--config", str(config)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )
    assert checked.returncode == 0, checked.stderr
    started = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        env={**env, "CREDENTIALS_DIRECTORY": str(credentials)},
    )
    assert (started.returncode, started.stdout) == (1, "")
    assert started.stderr.splitlines() == [
        f"{config}: channels.tg.webhook_secret: {ALLOWED}; this one has other characters"
    ]
