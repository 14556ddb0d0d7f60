"""The systemd install commands in docs/operations.md put things where the shipped unit looks.

The commands themselves need root and write /opt and /etc, so the test reads them: the venv
is created at the unit's ExecStart= path, the unit its `verify` line checks is the one
installed, every LoadCredential= is a secret `orchestrator init` writes and is installed
from where step 2 puts it, and the `sed` that rewrites init's config (run here for real)
turns every `file:secrets/...` into a `$CREDENTIALS_DIRECTORY` reference the daemon resolves.
(`tests/daemon/test_systemd_unit.py` runs `systemd-analyze verify` on the unit.)
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.config import resolve_secret
from orchestrator.init import SECRET_FILES, SECRETS_DIR
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
UNIT = (ROOT / "systemd" / "orchestrator.service").read_text(encoding="utf-8")
OPERATIONS = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def install_commands() -> list[str]:
    """The ```sh block of the systemd section, continuation lines joined, comments dropped."""
    section = OPERATIONS.split("\n## systemd\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def setting(key: str, *, commented: bool = False) -> list[str]:
    prefix = ("#", "") if commented else ("",)
    return [line.split("=", 1)[1] for line in UNIT.splitlines() for p in prefix if line.startswith(f"{p}{key}=")]


def test_the_commands_create_what_the_unit_names() -> None:
    commands = install_commands()
    (exec_start,) = setting("ExecStart")
    binary, _, rest = exec_start.partition(" ")
    venv = binary.removesuffix("/bin/orchestrator")
    assert venv == "/opt/orchestrator/.venv" and f"python3.11 -m venv {venv}" in commands
    assert f"{venv}/bin/pip install /opt/orchestrator" in commands
    config = rest.split("--config ", 1)[1]
    assert any(c.startswith("sed ") and c.endswith(f"> {config}") for c in commands)
    assert f"chmod 0644 {config}" in commands
    (docs,) = setting("Documentation")
    assert Path(docs.removeprefix("file://")).is_relative_to("/opt/orchestrator")  # the clone of step 1
    assert "install -m 0644 /opt/orchestrator/systemd/orchestrator.service /etc/systemd/system/orchestrator.service" in commands
    assert "systemd-analyze verify /etc/systemd/system/orchestrator.service" in commands
    assert {"systemctl daemon-reload", "systemctl enable --now orchestrator"} <= set(commands)
    assert any(c.startswith("journalctl -u orchestrator") for c in commands)


def test_every_credential_is_a_secret_init_writes_installed_where_step_2_puts_it() -> None:
    credentials = setting("LoadCredential", commented=True)
    names = {entry.split(":", 1)[0] for entry in credentials}
    assert names == set(SECRET_FILES.values())
    for entry in credentials:
        name, source = entry.split(":", 1)
        assert source == f"/etc/orchestrator/credentials/{name}"
    assert "install -d -m 0700 /etc/orchestrator/credentials" in install_commands()
    assert "install -m 0600 secrets/telegram_token /etc/orchestrator/credentials/telegram_token" in install_commands()
    # the provider key's line ships commented out: most local servers need none
    assert [e for e in setting("LoadCredential") if e.startswith("provider_api_key:")] == []


async def test_the_sed_turns_an_init_config_into_one_the_service_resolves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        (tmp_path / "tg").write_text(tg.token, encoding="utf-8")
        monkeypatch.setenv("ORCHESTRATOR_TELEGRAM_API", tg.api_base_url)
        code = await asyncio.to_thread(cli.main, [
            "init", "--non-interactive", "--config", str(tmp_path / "config.toml"), "--provider-url", llm.base_url,
            "--telegram-token-file", str(tmp_path / "tg"), "--telegram-sender", "7",
        ])
        capsys.readouterr()
        assert code == 0
    (sed,) = [c for c in install_commands() if c.startswith("sed ")]
    etc = tmp_path / "etc"
    etc.mkdir()
    sed = sed.replace("/etc/orchestrator/config.toml", str(etc / "config.toml"))
    subprocess.run(["bash", "-c", sed], cwd=tmp_path, check=True, timeout=30)
    text = (etc / "config.toml").read_text(encoding="utf-8")
    assert f"file:{SECRETS_DIR}/" not in text and 'state_dir = "/var/lib/orchestrator"' in text
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "telegram_token").write_text(tg.token, encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    channel = load_config(etc / "config.toml").channels["telegram"]
    assert re.fullmatch(r"file:\$CREDENTIALS_DIRECTORY/telegram_token", getattr(channel, "token"))
    assert resolve_secret(getattr(channel, "token"), base=etc) == tg.token
