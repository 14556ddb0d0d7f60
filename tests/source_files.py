"""The product's source files as text, for the rules that read the source (`ast`)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]


def product_sources(*tops: str) -> dict[str, str]:
    """Return every module under the folders `tops` (default: `orchestrator` and `channels`) by its repository path."""
    folders = tops or ("orchestrator", "channels")
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for top in folders for path in sorted((ROOT / top).rglob("*.py"))
    }
