"""What the wizard will write, rendered as TOML, and the write itself: all of it, or nothing.

Every answer is collected before anything touches the disk. Then each file is staged beside
its destination (a temporary file, flushed and fsynced; secrets created 0600 in a 0700
`secrets/` folder) and the staged files are moved into place with Ctrl-C held off, so an
interrupt leaves either the old files or the complete new set, never half of one. The
secrets folder gets a `.gitignore` of `*` (unless it has one), so a config kept in a git
checkout never takes its tokens along on a `git add .`.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

__all__ = ["SECRETS_DIR", "SECRET_FILES", "ChannelPlan", "ConfigPlan", "render_config", "write_plan"]

SECRETS_DIR: Final = "secrets"
# The secret files init may write, by what they hold; the systemd unit's LoadCredential=
# names are these (a test checks), so the same names work in $CREDENTIALS_DIRECTORY.
SECRET_FILES: Final = MappingProxyType({
    "provider key": "provider_api_key",
    "telegram token": "telegram_token",
    "slack bot token": "slack_bot_token",
    "slack app token": "slack_app_token",
    "discord token": "discord_token",
})
# Ignores everything in the secrets folder, itself included.
GITIGNORE: Final = "# Written by `orchestrator init`: nothing in this folder belongs in version control.\n*\n"
AGENT: Final = "assistant"
PROVIDER: Final = "main"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelPlan:
    """One `[channels.NAME]` table (values as written), its route's senders, and its secrets by file name."""

    name: str
    kind: str
    keys: tuple[tuple[str, str], ...]  # (key, plain string value), after `kind`
    senders: tuple[str, ...]
    secrets: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigPlan:
    """Everything `config.toml` and `secrets/` will hold."""

    base_url: str
    api_key: str | None  # a reference (env:/file:), or None for a server that needs no key
    model: str
    channels: tuple[ChannelPlan, ...]
    secrets: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # the provider's, by file name

    def all_secrets(self) -> dict[str, str]:
        """Return every secret file to write (name -> value)."""
        found = dict(self.secrets)
        for channel in self.channels:
            found.update(channel.secrets)
        return found


def secret_ref(name: str) -> str:
    """Return the reference the config uses for the secret file `name`."""
    return f"file:{SECRETS_DIR}/{name}"


def _toml(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes), and never a literal secret here.
    return json.dumps(value, ensure_ascii=False)


def render_config(plan: ConfigPlan) -> str:
    """Return the config file's text."""
    lines = [
        "# Written by `orchestrator init`. Every key is documented in docs/configuration.md.",
        f"# Secrets are files in {SECRETS_DIR}/ (mode 0600, git-ignored), referenced as `file:`; none is written here.",
        "",
        "[daemon]",
        'state_dir = "./state"',
        "",
        f"[providers.{PROVIDER}]",
        'kind = "openai"',
        f"base_url = {_toml(plan.base_url)}",
    ]
    if plan.api_key is not None:
        lines.append(f"api_key = {_toml(plan.api_key)}")
    lines += [
        "",
        f"[agents.{AGENT}]",
        f'provider = "{PROVIDER}"',
        f"model = {_toml(plan.model)}",
        'system_prompt = "You are a concise assistant."',
        "# No tools yet: add `tools = [...]` (docs/tools.md). A setting left out never grants anything.",
    ]
    for channel in plan.channels:
        lines += ["", f"[channels.{channel.name}]", f"kind = {_toml(channel.kind)}"]
        lines += [f"{key} = {_toml(value)}" for key, value in channel.keys]
    for channel in plan.channels:
        senders = ", ".join(_toml(s) for s in channel.senders)
        lines += [
            "",
            "[[routes]]",
            f"channel = {_toml(channel.name)}",
            f'agent = "{AGENT}"',
            f"senders = [{senders}]" + ("" if channel.senders else "  # nobody yet: add your user id"),
        ]
    return "\n".join(lines) + "\n"


def write_plan(config_path: Path, text: str, secrets: Mapping[str, str]) -> None:
    """Write the secrets and the config, all or nothing (see the module docstring)."""
    folder = config_path.parent
    secrets_dir = folder / SECRETS_DIR
    made_dir = False
    staged: list[tuple[Path, Path]] = []
    try:
        if secrets and not secrets_dir.is_dir():
            secrets_dir.mkdir(mode=0o700)
            made_dir = True
        for name, value in secrets.items():
            staged.append((_stage(secrets_dir / name, value + "\n", 0o600), secrets_dir / name))
        ignore = secrets_dir / ".gitignore"
        if secrets and not ignore.exists():  # the admin's own rules stay as they are
            staged.append((_stage(ignore, GITIGNORE, 0o644), ignore))
        staged.append((_stage(config_path, text, 0o644), config_path))
        with _interrupts_held():
            for temporary, final in staged:
                os.replace(temporary, final)
            staged.clear()
    except BaseException:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        if made_dir and not any(secrets_dir.iterdir()):
            secrets_dir.rmdir()
        raise


def write_file(path: Path, text: str) -> None:
    """Write one file whole (staged, then moved into place)."""
    temporary = _stage(path, text, 0o644)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _stage(final: Path, text: str, mode: int) -> Path:
    temporary = final.with_name(f".{final.name}.init-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.chmod(temporary, mode)  # exactly `mode`, whatever the umask
    return temporary


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM while files move into place; a pending one arrives afterwards."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
