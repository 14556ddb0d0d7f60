"""`orchestrator service install`: the systemd install of docs/operations.md, done by the program.

Every step is planned (and every refusal found) before anything is written: a config that is
empty, invalid, or references a `file:` secret outside `secrets/` is refused with its key;
`--dry-run` prints each step's commands and writes nothing. The steps are the documented
ones: the code and its venv in /opt/orchestrator (kept when its console script is there),
the tokens as root-only credentials, the config rewritten for the service (its `file:`
secrets read from `$CREDENTIALS_DIRECTORY`, the state in the unit's StateDirectory), the
shipped unit with only the installed credentials' `LoadCredential=` lines, then
`systemd-analyze verify`. The CLI ends with the doctor and, on the real root, `systemctl`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from orchestrator.checks import empty_config_problems, parse_config, secret_references
from orchestrator.config import Config, dotted
from orchestrator.errors import ConfigError, ConfigProblem, OrchestratorError
from orchestrator.init import SECRETS_DIR

__all__ = ["InstallRefused", "InstallStep", "ServiceLayout", "plan_install", "run_steps", "source_checkout"]

STATE_DIR: Final = "/var/lib/orchestrator"
_UNIT_NAME: Final = "orchestrator.service"
_CREDENTIAL: Final = re.compile(r"^#?LoadCredential=([^:]+):(.*)$")
_STATE_LINE: Final = re.compile(r"^state_dir\s*=.*$", re.MULTILINE)
_TIMEOUT_S: Final = 600.0


class InstallRefused(OrchestratorError):
    """The install cannot go on; `reason` says why and what to do, `written` whether a step had written."""

    def __init__(self, reason: str, *, written: bool = False) -> None:
        super().__init__(f"service install: {reason}" + (" (the steps before it are done)" if written else " (nothing written)"))
        self.reason, self.written = reason, written


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceLayout:
    """Where the unit looks for everything, under `root` (`/` for the machine itself)."""

    root: Path

    def at(self, path: str) -> Path:
        """Return the absolute path `path` of the unit under `root`."""
        return self.root / path.lstrip("/")

    @property
    def code(self) -> Path:
        return self.at("/opt/orchestrator")

    @property
    def script(self) -> Path:
        return self.at("/opt/orchestrator/.venv/bin/orchestrator")

    @property
    def config(self) -> Path:
        return self.at("/etc/orchestrator/config.toml")

    @property
    def credentials(self) -> Path:
        return self.at("/etc/orchestrator/credentials")

    @property
    def unit(self) -> Path:
        return self.at(f"/etc/systemd/system/{_UNIT_NAME}")


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallStep:
    """One documented step: what it does, the commands it stands for, and the work (None = already done)."""

    title: str
    commands: tuple[str, ...]
    work: Callable[[], None] | None


def plan_install(config: Config, *, layout: ServiceLayout, checkout: Path | None) -> list[InstallStep]:
    """Plan steps 1-4 for `config` (loaded from its file); raise `ConfigError`/`InstallRefused` first.

    `checkout` is the source tree to clone for step 1 (None when this program does not run
    from one; then the code must already be installed).
    """
    source = config.source
    if source is None:
        raise InstallRefused("the config must be a file")
    shown = str(source)
    problems = list(empty_config_problems(config, shown=shown))
    if (source.parent / "agents.d").is_dir():
        problems.append(ConfigProblem(
            shown, "agents", "agents.d/ beside the config is not installed by this command: follow "
            "docs/operations.md#systemd by hand, copying agents.d/ to /etc/orchestrator/",
        ))
    secrets: dict[str, Path] = {}
    for loc, ref in secret_references(config):
        if ref.scheme != "file":
            continue
        folder, _, name = ref.target.partition("/")
        if folder != SECRETS_DIR or not name or "/" in name:
            problems.append(ConfigProblem(
                shown, dotted(loc), f"{ref!r} is not a file in {SECRETS_DIR}/: the service reads secrets from "
                f"$CREDENTIALS_DIRECTORY, installed from {SECRETS_DIR}/ (where `orchestrator init` writes them)",
            ))
            continue
        path = source.parent / ref.target
        if not path.is_file():
            problems.append(ConfigProblem(shown, dotted(loc), f"{ref!r}: {path} does not exist"))
        secrets[name] = path
    text = _service_config(source.read_text(encoding="utf-8"))
    if problems:
        raise ConfigError(problems)
    _check_service_config(text, shown=str(layout.config))
    unit_source = _shipped_unit(layout, checkout)
    return [
        _code_step(layout, checkout),
        InstallStep(
            title="2. the tokens: root-only files systemd hands to the service (LoadCredential=)",
            commands=(f"install -d -m 0700 {layout.credentials}", *(
                f"install -m 0600 {path} {layout.credentials / name}" for name, path in secrets.items()
            )),
            work=lambda: _install_credentials(secrets, layout.credentials),
        ),
        InstallStep(
            title=f"3. the config, its file: secrets read from $CREDENTIALS_DIRECTORY, the state in {STATE_DIR}",
            commands=(f"install -d -m 0755 {layout.config.parent}",
                      f"(rewritten) {source} > {layout.config}", f"chmod 0644 {layout.config}"),
            work=lambda: _write(layout.config, text, 0o644, folder_mode=0o755),
        ),
        InstallStep(
            title="4. the unit, with the LoadCredential= lines of the tokens installed",
            commands=(f"install -m 0644 {unit_source} {layout.unit}", f"systemd-analyze verify {_verify_root(layout)}"
                      f"{layout.unit}"),
            work=lambda: _install_unit(unit_source, layout, frozenset(secrets)),
        ),
        _doctor_step(layout),
        _start_step(layout),
    ]


def source_checkout() -> Path | None:
    """Return the git checkout this program runs from (what step 1 clones), None for an installed package."""
    tree = Path(__file__).resolve().parents[2]
    return tree if (tree / ".git").exists() and (tree / "pyproject.toml").is_file() else None


def _doctor_step(layout: ServiceLayout) -> InstallStep:
    env = {**os.environ, "CREDENTIALS_DIRECTORY": str(layout.credentials)}
    argv = [sys.executable, "-m", "orchestrator.cli", "check", "--connect", "--config", str(layout.config)]

    def work() -> None:
        done = subprocess.run(argv, env=env, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise OSError(f"the doctor refused {layout.config}: fix the lines above, then run this again")

    return InstallStep(
        title="5. the doctor, from the service's point of view",
        commands=(f"CREDENTIALS_DIRECTORY={layout.credentials} orchestrator check --connect --config {layout.config}",),
        work=work,
    )


def _start_step(layout: ServiceLayout) -> InstallStep:
    commands = ("systemctl daemon-reload", "systemctl enable --now orchestrator")
    if layout.root != Path("/"):
        return InstallStep(title="6. start it now and at every boot (not under --root: run on the machine)",
                           commands=commands, work=None)

    def work() -> None:
        for command in commands:
            subprocess.run(command.split(), check=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)

    return InstallStep(title="6. start it now and at every boot", commands=commands, work=work)


def run_steps(steps: list[InstallStep], *, dry_run: bool, out: TextIO) -> None:
    """Print each step and its commands; unless `dry_run`, do it (raises `InstallRefused` on a failure)."""
    for step in steps:
        print(step.title, file=out)
        how = "not run: " if step.work is None else "would run: " if dry_run else "$ "
        for command in step.commands:
            print(f"  {how}{command}", file=out)
        if not dry_run and step.work is not None:
            try:
                step.work()
            except (OSError, subprocess.SubprocessError) as exc:
                raise InstallRefused(f"step {step.title.split('.')[0]} failed: {exc}", written=True) from None


def _code_step(layout: ServiceLayout, checkout: Path | None) -> InstallStep:
    title = f"1. the code and its venv in {layout.code}"
    venv = layout.code / ".venv"
    commands = (f"git clone {checkout or '<checkout>'} {layout.code}", f"{sys.executable} -m venv {venv}",
                f"{venv}/bin/pip install {layout.code}")
    if os.access(layout.script, os.X_OK):
        return InstallStep(title=f"{title} (already there: kept)", commands=(), work=None)
    if checkout is None:
        raise InstallRefused(
            f"{layout.script} is not there and this program does not run from a git checkout: do step 1 of "
            "docs/operations.md#systemd by hand, then run this again"
        )

    def work() -> None:
        for argv in (["git", "clone", "-q", str(checkout), str(layout.code)],
                     [sys.executable, "-m", "venv", str(venv)], [f"{venv}/bin/pip", "install", "-q", str(layout.code)]):
            subprocess.run(argv, check=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)

    return InstallStep(title=title, commands=commands, work=work)


def _service_config(text: str) -> str:
    """Return init's config as the service reads it: the documented `sed` of step 3."""
    text = text.replace(f'"file:{SECRETS_DIR}/', '"file:$CREDENTIALS_DIRECTORY/')
    line = f'state_dir = "{STATE_DIR}"'
    if _STATE_LINE.search(text):
        return _STATE_LINE.sub(line, text, count=1)
    if re.search(r"^\[daemon\]\s*$", text, re.MULTILINE):
        return re.sub(r"^\[daemon\]\s*$", f"[daemon]\n{line}", text, count=1, flags=re.MULTILINE)
    return f"[daemon]\n{line}\n\n{text}"


def _check_service_config(text: str, *, shown: str) -> None:
    """Refuse a rewritten config that is empty or does not load (what a bad `sed` would leave)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([ConfigProblem(shown, "", f"the rewritten config is not TOML: {exc}")]) from None
    config = parse_config(raw, shown=shown)
    problems = empty_config_problems(config, shown=shown)
    if problems:
        raise ConfigError(problems)


def _shipped_unit(layout: ServiceLayout, checkout: Path | None) -> Path:
    for folder in (checkout, layout.code):
        if folder is not None and (folder / "systemd" / _UNIT_NAME).is_file():
            return folder / "systemd" / _UNIT_NAME
    raise InstallRefused(f"no systemd/{_UNIT_NAME} in {checkout or layout.code}")


def _verify_root(layout: ServiceLayout) -> str:
    return "" if layout.root == Path("/") else f"--root={layout.root} "


def _write(path: Path, text: str, mode: int, *, folder_mode: int) -> None:
    path.parent.mkdir(mode=folder_mode, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(text)


def _install_credentials(secrets: dict[str, Path], folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for name, path in secrets.items():
        _write(folder / name, path.read_text(encoding="utf-8"), 0o600, folder_mode=0o700)


def _install_unit(source: Path, layout: ServiceLayout, installed: frozenset[str]) -> None:
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        match = _CREDENTIAL.match(line)
        if match is None:
            lines.append(line)
        elif match.group(1) in installed:
            lines.append(line.lstrip("#"))  # a commented one (the provider key) is wanted now
    known = {m.group(1) for line in lines if (m := _CREDENTIAL.match(line))}
    extra = [f"LoadCredential={name}:/etc/orchestrator/credentials/{name}" for name in sorted(installed - known)]
    if extra:
        at = max(i for i, line in enumerate(lines) if line.startswith(("LoadCredential=", "WorkingDirectory=")))
        lines[at + 1 : at + 1] = extra
    _write(layout.unit, "\n".join(lines) + "\n", 0o644, folder_mode=0o755)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # checked by the unit's first start
    argv = [analyze, "verify", *([f"--root={layout.root}"] if layout.root != Path("/") else []), str(layout.unit)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or done.stderr.strip():
        raise OSError(f"systemd-analyze verify: {done.stderr.strip() or done.stdout.strip()}")
