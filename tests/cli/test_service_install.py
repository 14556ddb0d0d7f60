"""`orchestrator service install` in a real process: the documented systemd steps done by the program.

A dry run prints every step and writes nothing; an empty or invalid config is refused before
anything is written; an install into a temporary root (a fresh machine's systemd units, the
code's console script already there) writes the credentials, the config and the unit where
the shipped unit looks, verifies the unit there and ends with the doctor.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.test_systemd_unit import UNIT, _fresh_machine, _stand_in_for_pip
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def service_install(config: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "service", "install", "--config", str(config), *more],
        capture_output=True, text=True, cwd=config.parent, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"},
    )


def checkout(folder: Path, *, provider: str, telegram: str, token: str) -> Path:
    """What `orchestrator init` leaves: config.toml and secrets/telegram_token (0600)."""
    (folder / "secrets").mkdir(mode=0o700)
    secret = folder / "secrets" / "telegram_token"
    secret.write_text(token + "\n", encoding="utf-8")
    secret.chmod(0o600)
    config = folder / "config.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "./state"\n[providers.main]\nbase_url = "{provider}"\nmax_retries = 0\n'
        '[agents.assistant]\nprovider = "main"\nmodel = "fake-model"\n'
        f'[channels.telegram]\nkind = "telegram"\ntoken = "file:secrets/telegram_token"\napi_base_url = "{telegram}"\n'
        '[[routes]]\nchannel = "telegram"\nagent = "assistant"\nsenders = ["7"]\n',
        encoding="utf-8",
    )
    return config


def test_a_dry_run_prints_every_step_and_writes_nothing(tmp_path: Path) -> None:
    config = checkout(tmp_path, provider="http://127.0.0.1:9/v1", telegram="http://127.0.0.1:9", token="1:" + "A" * 35)
    root = tmp_path / "root"
    root.mkdir()
    done = service_install(config, "--dry-run", "--root", str(root))
    assert done.returncode == 0, done.stderr
    titles = [line for line in done.stdout.splitlines() if not line.startswith("  ")]
    assert [t.split(" ", 1)[0] for t in titles] == ["1.", "2.", "3.", "4.", "5.", "6."]
    assert f"  would run: install -m 0600 {tmp_path}/secrets/telegram_token {root}/etc/orchestrator/credentials/telegram_token" in (
        done.stdout.splitlines()
    )
    assert f"  would run: systemd-analyze verify --root={root} {root}/etc/systemd/system/orchestrator.service" in (
        done.stdout.splitlines()
    )
    assert done.stdout.splitlines()[-1] == "  not run: systemctl enable --now orchestrator"
    assert list(root.iterdir()) == []


@pytest.mark.parametrize(("text", "line"), [
    ("", "agents: the config defines no agent (0 providers, 0 channels, 0 routes), so nothing could answer: "
     "run `orchestrator init` to write a first config"),
    ('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n'
     '[channels.tg]\nkind = "telegram"\ntoken = "file:tg.token"\n',
     "channels.tg.token: 'file:tg.token' is not a file in secrets/: the service reads secrets from "
     "$CREDENTIALS_DIRECTORY, installed from secrets/ (where `orchestrator init` writes them)"),
    ('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "q"\nmodel = "m"\n',
     "agents.a.provider: unknown provider 'q'"),
], ids=["empty", "secret-outside-secrets", "invalid"])
def test_an_empty_or_invalid_config_is_refused_before_anything_is_written(tmp_path: Path, text: str, line: str) -> None:
    # the systemd steps: a `sed` that found no config.toml wrote an empty one, and the doctor passed it
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    root = tmp_path / "root"
    root.mkdir()
    done = service_install(config, "--root", str(root))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"{config}: {line}")
    assert list(root.iterdir()) == []


@pytest.mark.timeout(120)
async def test_an_install_into_a_root_puts_everything_where_the_unit_looks_and_ends_with_the_doctor(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    _fresh_machine(root)
    venv = root / "opt/orchestrator/.venv"
    (venv / "bin").mkdir(parents=True)
    _stand_in_for_pip(venv)  # step 1 done before (it needs the package index): kept
    async with FakeOpenAI() as llm, FakeTelegram(username="ops_bot") as tg:
        config = checkout(tmp_path, provider=llm.base_url, telegram=tg.api_base_url, token=tg.token)
        done = await asyncio.to_thread(service_install, config, "--root", str(root))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == f"1. the code and its venv in {root}/opt/orchestrator (already there: kept)"
    # step 5, the doctor, ran on the installed config with the installed credentials
    installed = root / "etc/orchestrator/config.toml"
    assert "channel telegram (telegram): connected as @ops_bot" in out
    assert f"{installed}: ok (1 agents, 1 providers, 1 channels, 1 routes)" in out
    assert out[-3:] == [
        "6. start it now and at every boot (not under --root: run on the machine)",
        "  not run: systemctl daemon-reload",
        "  not run: systemctl enable --now orchestrator",
    ]
    credential = root / "etc/orchestrator/credentials/telegram_token"
    assert credential.read_text(encoding="utf-8") == tg.token + "\n"
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    assert stat.S_IMODE(credential.parent.stat().st_mode) == 0o700
    text = installed.read_text(encoding="utf-8")
    assert stat.S_IMODE(installed.stat().st_mode) == 0o644
    assert 'token = "file:$CREDENTIALS_DIRECTORY/telegram_token"' in text
    assert 'state_dir = "/var/lib/orchestrator"' in text and "./state" not in text
    unit = (root / "etc/systemd/system/orchestrator.service").read_text(encoding="utf-8")
    assert unit.replace("\n", "") == "".join(
        line for line in UNIT.read_text(encoding="utf-8").splitlines()
        if not line.startswith(("LoadCredential=", "#LoadCredential=")) or line.startswith("LoadCredential=telegram_token:")
    )  # the shipped unit, only the credentials not installed taken out
