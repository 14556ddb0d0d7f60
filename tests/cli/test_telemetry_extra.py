"""`[telemetry]` configured where the `opentelemetry` extra is not installed: `check` and `run` say so.

The test venv has the extra, so each command runs in a subprocess whose PYTHONPATH puts a
stub `opentelemetry` package first: importing it raises ImportError, as a missing package does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import WriteConfig

pytestmark = pytest.mark.slow

CONFIG = (
    '[providers.p]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
    '[agents.a]\nprovider = "p"\nmodel = "m"\n'
    '[telemetry]\nexporter = "none"\n'
)
INSTALL = "pip install 'orchestrator[telemetry]' (or remove [telemetry])"


def orchestrator(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI with the OpenTelemetry packages made unimportable."""
    stub = tmp_path / "no-otel" / "opentelemetry"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text('raise ImportError("No module named \'opentelemetry\'")\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, env=env, timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_stub_really_hides_the_packages(tmp_path: Path) -> None:
    done = orchestrator(tmp_path, "--version")
    assert done.returncode == 0
    probe = subprocess.run(
        [sys.executable, "-c", "import opentelemetry.sdk.trace"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "no-otel")},
    )
    assert probe.returncode == 1 and "ImportError" in probe.stderr


def test_check_reports_telemetry_without_its_packages_and_is_not_ok(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    # The newcomer's `check` said ok; the daemon then refused to start (or, before that, ran
    # without traces): the same file must not pass one and fail the other.
    path = write_config(CONFIG)
    done = orchestrator(tmp_path, "check", "--config", str(path))
    assert done.returncode == 1
    assert ": ok (" not in done.stdout
    assert done.stderr.splitlines() == [
        f"{path}: telemetry: configured, but the OpenTelemetry package 'opentelemetry-sdk' is not installed, "
        f"so the daemon would refuse to start: {INSTALL}"
    ]


def test_check_connect_lists_it_among_the_problems(tmp_path: Path, write_config: WriteConfig) -> None:
    path = write_config(CONFIG)
    done = orchestrator(tmp_path, "check", "--connect", "--config", str(path))
    assert done.returncode == 1 and ": ok (" not in done.stdout
    assert f"{path}: telemetry: configured, but the OpenTelemetry package 'opentelemetry-sdk'" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_refuses_to_start_with_one_line_naming_the_extra(tmp_path: Path, write_config: WriteConfig) -> None:
    path = write_config(CONFIG + f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n')
    done = orchestrator(tmp_path, "run", "--config", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: [telemetry] is configured but the OpenTelemetry package 'opentelemetry-sdk' is not installed: "
        f"{INSTALL}"
    ]
    assert not (tmp_path / "state" / "sessions.sqlite3").exists()


def test_with_the_packages_check_is_ok(write_config: WriteConfig) -> None:
    path = write_config(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "check", "--config", str(path)], capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"{path}: ok (1 agents, 1 providers, 0 channels, 0 routes)")
