"""Resolve `env:NAME` / `file:PATH` secret references at the moment a secret is used."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from orchestrator.errors import EmptySecret, SecretError
from orchestrator.redaction import register_secret

__all__ = ["SecretRef", "resolve_secret", "secret_file"]


class SecretRef(str):
    """A secret given as `env:NAME` or `file:PATH`, never as a literal value."""

    __slots__ = ()

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_secret_ref, core_schema.str_schema())

    @property
    def scheme(self) -> str:
        return self.split(":", 1)[0]

    @property
    def target(self) -> str:
        return self.split(":", 1)[1]


def _secret_ref(value: str) -> SecretRef:
    scheme, _, target = value.partition(":")
    if scheme not in ("env", "file") or not target:
        raise ValueError(
            "secrets must be references ('env:NAME' or 'file:PATH'), not literal values"
        )
    return SecretRef(value)


def resolve_secret(ref: SecretRef, *, base: Path | None = None) -> str:
    """Return the secret's value; raise `SecretError` naming the reference when it is missing.

    An empty or whitespace-only value is `EmptySecret` (a `SecretError`), for `env:` and
    `file:` alike: a blank secret never stands for "no secret".

    `file:` paths are relative to `base` (the config file's folder) and
    `$CREDENTIALS_DIRECTORY` (systemd LoadCredential) is expanded. The value is registered
    for redaction (`orchestrator.redaction`) before it is returned.
    """
    value = _read(ref, base)
    register_secret(value)
    return value


def secret_file(ref: SecretRef, *, base: Path | None = None) -> Path:
    """Return the file a `file:` reference reads (`$VARS` and `~` expanded, relative to `base`)."""
    path = Path(os.path.expandvars(ref.target)).expanduser()
    return base / path if not path.is_absolute() and base is not None else path


def _read(ref: SecretRef, base: Path | None) -> str:
    if ref.scheme == "env":
        value = os.environ.get(ref.target)
        if value is None:
            raise SecretError(ref, f"environment variable {ref.target} is not set")
        if not value.strip():
            raise EmptySecret(ref, f"environment variable {ref.target} is empty")
        return value
    path = secret_file(ref, base=base)
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretError(ref, f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SecretError(ref, f"{path} is not UTF-8 text") from None
    if not value:
        raise EmptySecret(ref, f"{path} is empty (or only whitespace)")
    return value
