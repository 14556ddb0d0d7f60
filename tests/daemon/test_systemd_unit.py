"""The shipped systemd unit passes `systemd-analyze verify` with no warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "orchestrator.service"
INSTALLED = "/opt/orchestrator/.venv/bin/orchestrator"


def verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is required (Debian package systemd; .ci/run installs it)"
    # verify checks that ExecStart exists: point it at this venv's console script
    script = Path(sys.executable).with_name("orchestrator")
    assert script.is_file(), "install the package first (pip install -e .)"
    unit = tmp_path / "orchestrator.service"
    unit.write_text(unit_text.replace(INSTALLED, str(script)), encoding="utf-8")
    return subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)


def test_unit_verifies_cleanly(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    for required in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "NoNewPrivileges=yes",
                     "ProtectSystem=strict", "StateDirectory=orchestrator", "LoadCredential="):
        assert required in text
    done = verify(text, tmp_path)
    assert (done.returncode, done.stderr.strip()) == (0, "")


def _setting(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_unit_lets_the_shell_sandbox_start(tmp_path: Path) -> None:
    # Every namespace bwrap is asked to create (plus its mount namespace) must be allowed,
    # and nothing may cover /proc with binds: the kernel then refuses bwrap's fresh /proc.
    from orchestrator.tools.sandbox import bwrap_arguments

    text = UNIT.read_text(encoding="utf-8")
    flags = {"--unshare-user": "user", "--unshare-pid": "pid", "--unshare-net": "net", "--unshare-ipc": "ipc",
             "--unshare-uts": "uts"}
    asked = {flags[a] for a in bwrap_arguments(network=False) if a.startswith("--unshare")} | {"mnt"}
    assert asked == {"user", "mnt", "pid", "net", "ipc", "uts"}
    (restrict,) = _setting(text, "RestrictNamespaces")
    assert asked <= set(restrict.split())
    assert _setting(text, "ProtectKernelTunables") == ["no"]
    assert not _setting(text, "ProtectProc") and not _setting(text, "ProcSubset")
    # default workspaces live beside the state directory: the unit must make it writable
    (state,) = _setting(text, "StateDirectory")
    assert state.split() == ["orchestrator", "orchestrator-workspaces"]
    done = verify(text, tmp_path)
    assert (done.returncode, done.stderr.strip()) == (0, "")


def test_verify_would_catch_a_broken_unit(tmp_path: Path) -> None:
    done = verify(UNIT.read_text(encoding="utf-8").replace("WatchdogSec=60s", "WatchdogSec=soon"), tmp_path)
    assert "Failed to parse sec value" in done.stderr
