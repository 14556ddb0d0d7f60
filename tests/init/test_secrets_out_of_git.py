"""`init` keeps the secrets it writes out of version control, and `check` warns about a `file:`
secret a `git add` would commit (inside a work tree, not ignored), with git or without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import cli
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import DEFAULT_TOKEN
from tests.init.test_wizard_flags import ROOT, init, token_file

pytestmark = pytest.mark.slow


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, check=True, timeout=30)
    return done.stdout


def check(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, list[str]]:
    code = cli.main(["check", "--config", str(config)])
    return code, capsys.readouterr().err.splitlines()


async def test_init_in_a_checkout_writes_secrets_git_ignores_and_check_warns_about_one_it_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(tmp_path, "init", "-q")
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm:
        key = token_file(tmp_path.parent, f"{tmp_path.name}-key", "sk-test-123")
        code, _, err = await init(capsys, "--config", str(config), "--provider-url", llm.base_url, "--api-key-file", key)
    assert (code, err) == (0, [])
    git(tmp_path, "add", ".")
    staged = git(tmp_path, "diff", "--cached", "--name-only").split()
    assert staged == ["config.toml"]  # `git add .` took the config and no secret
    assert (tmp_path / "secrets" / "provider_api_key").read_text(encoding="utf-8") == "sk-test-123\n"
    assert check(capsys, config) == (0, [])
    # a secret file the admin put beside the config, which nothing ignores
    (tmp_path / "tg.token").write_text(f"{DEFAULT_TOKEN}\n", encoding="utf-8")
    (tmp_path / "tg.token").chmod(0o600)  # `check` refuses a secret others can read
    with config.open("a", encoding="utf-8") as handle:
        handle.write('\n[channels.tg]\nkind = "telegram"\ntoken = "file:tg.token"\n')
    code, err = check(capsys, config)
    assert code == 0
    assert err == [
        f"warning: {config}: channels.tg.token: 'file:tg.token' is inside the git work tree {tmp_path} and git "
        "does not ignore it: a `git add` would commit it: list it in a .gitignore (`orchestrator init` writes "
        "secrets/.gitignore)"
    ]
    (tmp_path / ".gitignore").write_text("*.token\n", encoding="utf-8")
    assert check(capsys, config) == (0, [])
    # without git on the PATH, the .git above is enough to say so (of the init's secrets too: unchecked)
    (tmp_path / ".gitignore").unlink()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "check", "--config", str(config)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        env={**{k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LC_", "LANG"))}, "PATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    unchecked = "git is not installed here, so whether it ignores the file was not checked"
    assert done.stderr.splitlines() == [
        f"warning: {config}: {key}: {ref!r} is inside the git work tree {tmp_path}; {unchecked}"
        for key, ref in (("providers.main.api_key", "file:secrets/provider_api_key"), ("channels.tg.token", "file:tg.token"))
    ]
