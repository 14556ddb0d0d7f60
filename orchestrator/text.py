"""Text helpers shared by every error message that offers a correction."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["suggest"]


def suggest(word: str, candidates: Iterable[str]) -> str:
    """Return ` (did you mean 'x'?)` for a close candidate, else an empty string."""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""
