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
from orchestrator.seam import ConstructionPath, SandboxHost, Services, resolve, sandbox_notices, shell_sandbox
from tests.conftest import WriteConfig

pytestmark = pytest.mark.slow

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


# Hosts the choice is made for: the probe results `shell_sandbox` would read on such a machine.
NO_USERNS = "/usr/bin/bwrap cannot create namespaces here: setting up uid map: Permission denied"
SECCOMP_OFF = "the kernel has no seccomp filters (Invalid argument)"


def _host(*, seccomp: str | None, abi: int = 7, bwrap: str | None = NO_USERNS) -> SandboxHost:
    return SandboxHost(bwrap=bwrap, landlock_offline=None, landlock_online=None, landlock_abi=abi, seccomp=seccomp)


def test_auto_refuses_a_landlock_with_holes(load: Callable[..., Config]) -> None:
    agent = load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n').agents["a"]

    sandbox = shell_sandbox("a", agent, host=_host(seccomp=SECCOMP_OFF))

    assert sandbox.kind is None
    assert sandbox.describe() == (
        f"refused: no sandbox works here (bwrap: {NO_USERNS}; landlock leaves open unix sockets (tmux, ssh-agent, "
        "D-Bus: commands outside the sandbox), UDP, setsid children outlive the call, io_uring); "
        'write [agents.a.shell] sandbox = "landlock" to run commands with those holes, or '
        '[agents.a.shell] sandbox = "none" to run commands unconfined'
    )


def test_auto_takes_landlock_when_seccomp_closes_its_holes(load: Callable[..., Config]) -> None:
    agent = load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n').agents["a"]
    assert shell_sandbox("a", agent, host=_host(seccomp=None)).describe() == "landlock (network off)"


@pytest.mark.parametrize(
    ("seccomp", "abi", "network", "open_"),
    [
        (SECCOMP_OFF, 7, "true", "unix sockets (tmux, ssh-agent, D-Bus: commands outside the sandbox), "
         "setsid children outlive the call, io_uring"),
        (None, 5, "false", "signals to the daemon user's processes (Landlock ABI 5 < 6)"),
    ],
)
def test_a_written_landlock_runs_with_its_holes_named(
    load: Callable[..., Config], seccomp: str | None, abi: int, network: str, open_: str
) -> None:
    agent = load(BASE + f'[agents.a.shell]\nallowed_commands = ["cat"]\nsandbox = "landlock"\nnetwork = {network}\n'
                 ).agents["a"]

    sandbox = shell_sandbox("a", agent, host=_host(seccomp=seccomp, abi=abi))

    assert sandbox.kind == "landlock"
    assert sandbox.describe() == f"landlock (network {'on' if network == 'true' else 'off'}); open: {open_}"


def test_the_limits_are_config_keys(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(
        BASE.replace('tools = ["shell"]', 'tools = ["shell"]\nworkspace_max_mb = 50')
        + '[agents.a.shell]\nallowed_commands = ["cat"]\ncpu_seconds = 5\nmemory_mb = 512\nfile_size_mb = 8\n'
        'tmp_mb = 16\nmax_processes = 32\nmax_output_kb = 4\n'
    )
    assert cli.main(["policy", "a", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'shell_limits: "cpu 5s, memory 512 MiB, file 8 MiB, /tmp 16 MiB, 32 processes, output 4 KiB"\n' in out
    assert f"workspace_max_bytes: {50 * 1024**2}\n" in out


def test_the_limits_default_to_bounds(load: Callable[..., Config]) -> None:
    execution = resolve(load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n'), "a",
                        path=ConstructionPath.CLI_RUN, services=Services())
    limits = execution.security.shell_sandbox.limits
    assert limits.describe() == "cpu 60s, memory 4096 MiB, file 256 MiB, /tmp 64 MiB, 256 processes, output 64 KiB"
    assert execution.security.workspace_max_bytes == 1024 * 1024**2


@pytest.mark.parametrize(("key", "value"), [("tmp_mb", "0"), ("max_processes", "0"), ("cpu_seconds", '"60"')])
def test_a_bad_limit_is_one_line_naming_file_and_key(load: Callable[..., Config], key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(BASE + f'[agents.a.shell]\n{key} = {value}\n')
    (line,) = str(caught.value).splitlines()
    assert f"config.toml: agents.a.shell.{key}: " in line


def test_check_warns_of_a_written_landlock_with_holes(load: Callable[..., Config]) -> None:
    config = load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\nsandbox = "landlock"\n')

    (notice,) = sandbox_notices(config, host=_host(seccomp=None, abi=5))

    assert notice.attention
    assert notice.text == ("agent a: shell sandbox landlock (network off); "
                           "open: signals to the daemon user's processes (Landlock ABI 5 < 6)")


def test_auto_refuses_a_networked_bwrap_without_seccomp(load: Callable[..., Config]) -> None:
    # network = true shares the host's network namespace, and so its abstract unix sockets
    agent = load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\nnetwork = true\n').agents["a"]
    offline = load(BASE + '[agents.a.shell]\nallowed_commands = ["cat"]\n').agents["a"]
    host = _host(seccomp=SECCOMP_OFF, bwrap=None)

    sandbox = shell_sandbox("a", agent, host=host)

    assert sandbox.kind is None
    assert sandbox.reason.startswith("no sandbox works here (bwrap leaves open abstract unix sockets of the host "
                                     "(network = true), io_uring; landlock leaves open unix sockets")
    assert sandbox.reason.endswith('write [agents.a.shell] sandbox = "bwrap" or "landlock" to run commands with '
                                   'those holes, or [agents.a.shell] sandbox = "none" to run commands unconfined')
    assert shell_sandbox("a", offline, host=host).describe() == "bwrap (network off)"  # its own netns: no hole
