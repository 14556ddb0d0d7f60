"""Resolve `env:NAME` / `file:PATH` secret references at the moment a secret is used."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.config.models import SecretRef
from orchestrator.errors import SecretError

__all__ = ["resolve_secret"]


def resolve_secret(ref: SecretRef, *, base: Path | None = None) -> str:
    """Return the secret's value; raise `SecretError` naming the reference when it is missing.

    `file:` paths are relative to `base` (the config file's folder) and
    `$CREDENTIALS_DIRECTORY` (systemd LoadCredential) is expanded.
    """
    if ref.scheme == "env":
        value = os.environ.get(ref.target)
        if not value:
            raise SecretError(ref, f"environment variable {ref.target} is not set")
        return value
    path = Path(os.path.expandvars(ref.target)).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretError(ref, f"cannot read {path}: {exc.strerror}") from None
