"""Meta-test: the INDEX's bookkeeping only (fields present, evidence tests exist)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.parity.index import INDEX

ROOT = Path(__file__).resolve().parents[2]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
    }


def test_every_row_is_complete_and_its_evidence_exists() -> None:
    assert INDEX, "the parity INDEX is empty"
    missing: list[str] = []
    for row in INDEX:
        for field in ("surface", "setting", "owner", "tracking", "evidence"):
            if not getattr(row, field).strip():
                missing.append(f"{row.surface}/{row.setting}: empty {field}")
        file, sep, name = row.evidence.partition("::")
        path = ROOT / file
        if not sep or not path.is_file() or name not in _test_names(path):
            missing.append(f"{row.surface}/{row.setting}: evidence {row.evidence!r} does not exist")
    assert missing == []


def test_rows_are_unique() -> None:
    keys = [(row.surface, row.setting) for row in INDEX]
    assert len(keys) == len(set(keys))
