"""The seam resolves `[agents.X.shell] sandbox` / `network`; `check` and `policy` show it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.config import Config
from orchestrator.errors import ConfigError
from orchestrator.seam import ConstructionPath, Services, resolve, sandbox_notices
from tests.conftest import WriteConfig

ROOT = Path(__file__).resolve().parents[2]
BASE = '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\ntools = ["shell"]\n'


def _sandbox(config: Config, agent: str = "a") -> str:
    execution = resolve(config, agent, path=ConstructionPath.CLI_RUN, services=Services())
    return execution.security.shell_sandbox.describe()


def test_omitted_sandbox_is_the_strongest_that_works_with_no_network(load: Callable[..., Config]) -> None:
    # bubblewrap is installed on every machine that runs this suite (.ci/run installs it)
    assert _sandbox(load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n')) == "bwrap (network off)"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ('sandbox = "bwrap"\nnetwork = true\n', "bwrap (network on)"),
        ('sandbox = "landlock"\n', "landlock (network off)"),
        ('sandbox = "none"\n', "none (network on)"),  # unconfined: nothing withholds the network
    ],
)
def test_written_sandbox_is_resolved_as_written(load: Callable[..., Config], written: str, expected: str) -> None:
    assert _sandbox(load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n' + written)) == expected


def test_unknown_sandbox_is_one_config_line(load: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError) as caught:
        load(BASE + '[agents.a.shell]\nsandbox = "chroot"\n')
    (line,) = str(caught.value).splitlines()
    assert line.endswith("config.toml: agents.a.shell.sandbox: input should be 'auto', 'bwrap', 'landlock' or 'none' "
                         "(got 'chroot')")


def test_check_prints_each_shell_agents_sandbox(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\nsandbox = "landlock"\n'
        '[agents.quiet]\nprovider = "p"\nmodel = "m"\n'
    )
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "check", "--config", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert (done.returncode, done.stdout.splitlines()[1:]) == (0, ["agent a: shell sandbox landlock (network off)"])


def test_policy_shows_the_sandbox(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n')
    assert cli.main(["policy", "a", "--config", str(path)]) == 0
    assert 'shell_sandbox: "bwrap (network off)"\n' in capsys.readouterr().out


def test_files_left_in_the_old_default_workspace_are_named(load: Callable[..., Config]) -> None:
    config = load(BASE)
    old = config.state_path() / "workspaces" / "a"
    old.mkdir(parents=True)
    (old / "notes.txt").write_text("keep me")

    (notice,) = sandbox_notices(config)

    assert notice.attention
    assert str(old) in notice.text and str(config.state_path().with_name("state-workspaces") / "a") in notice.text
    assert (old / "notes.txt").read_text() == "keep me"  # told, never deleted


async def test_commands_get_only_the_declared_environment(
    load: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_TEST_API_KEY", "sk-daemon-only")
    config = load(BASE + '[agents.a.shell]\nallowed_commands = ["env"]\nenv = { TZ = "UTC", LANG = "C" }\n')
    execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=Services())
    shell = execution.tools.get("shell")
    assert shell is not None

    result = await shell.invoke({"argv": ["env"]})

    names = sorted(line.split("=", 1)[0] for line in result.split("--- stdout ---\n")[1].split("\n--- stderr")[0].splitlines())
    assert names == ["HOME", "LANG", "PATH", "PWD", "TZ"]  # bwrap sets PWD (the workspace)
    assert "TZ=UTC\n" in result and "LANG=C\n" in result and "sk-daemon-only" not in result
    assert execution.security.shell_sandbox.describe() == "bwrap (network off, env: LANG, TZ)"


@pytest.mark.parametrize("name", ["PATH", "HOME", "A B"])
def test_env_cannot_set_path_home_or_a_non_name(load: Callable[..., Config], name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(BASE + f'[agents.a.shell]\nenv = {{ "{name}" = "./bin" }}\n')
    (line,) = str(caught.value).splitlines()
    assert "agents.a.shell.env" in line
