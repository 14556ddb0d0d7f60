"""The one built-in/MCP/skill tool filter: grants by name or glob, exclusions always subtract."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

__all__ = ["is_granted", "matches_any"]


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Return True when `name` matches one of the names or globs in `patterns`."""
    return any(name == p or fnmatchcase(name, p) for p in patterns)


def is_granted(name: str, *, allowed: Iterable[str], excluded: Iterable[str]) -> bool:
    """Return True when `allowed` grants `name` and `excluded` does not take it away.

    An empty `allowed` grants nothing: omission is never a grant.
    """
    return matches_any(name, allowed) and not matches_any(name, excluded)
