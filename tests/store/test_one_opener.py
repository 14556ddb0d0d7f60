"""One SQLite opener: no module but `orchestrator/store/sqlite.py` calls `sqlite3.connect`.

Read from the source with `ast`: `sqlite3.connect(...)` through any import alias of the module
(`import sqlite3 as db`, `from sqlite3 import dbapi2`), `from sqlite3 import connect as c`, a
simple assignment (`c = sqlite3.connect`) or `getattr(sqlite3, "connect")`. The self-test
plants each form in the memory store and sees the rule fail.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Final

import pytest

from tests.source_files import product_sources

pytestmark = pytest.mark.slow

OPENER: Final = "orchestrator/store/sqlite.py"
_MODULES: Final = frozenset({"sqlite3", "sqlite3.dbapi2"})


def _bindings(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Return (names bound to the sqlite3 module, names bound to its `connect`) in `tree`."""
    modules: set[str] = set()
    connects: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _MODULES:
                    modules.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module in _MODULES:
            for alias in node.names:
                if alias.name == "connect":
                    connects.add(alias.asname or alias.name)
                elif alias.name == "dbapi2":
                    modules.add(alias.asname or alias.name)
    while True:
        before = len(modules) + len(connects)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if _is_connect(node.value, modules, connects):
                    connects |= names
                elif isinstance(node.value, ast.Name) and node.value.id in modules:
                    modules |= names
        if len(modules) + len(connects) == before:
            return modules, connects


def _is_module(node: ast.AST, modules: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in modules
    # sqlite3.dbapi2
    return isinstance(node, ast.Attribute) and node.attr == "dbapi2" and _is_module(node.value, modules)


def _is_connect(node: ast.AST, modules: set[str], connects: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in connects
    if isinstance(node, ast.Attribute):
        return node.attr == "connect" and _is_module(node.value, modules)
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        and len(node.args) >= 2 and _is_module(node.args[0], modules)
        and isinstance(node.args[1], ast.Constant) and node.args[1].value == "connect"
    )


def connect_calls(sources: Mapping[str, str]) -> list[str]:
    """Return `path:line` of every call of `sqlite3.connect` in `sources` (path: text)."""
    found: list[str] = []
    for path, text in sorted(sources.items()):
        tree = ast.parse(text, filename=path)
        modules, connects = _bindings(tree)
        found.extend(
            f"{path}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _is_connect(node.func, modules, connects)
        )
    return found


def outside_the_opener(sources: Mapping[str, str]) -> list[str]:
    """Return the calls of `sqlite3.connect` anywhere but the one opener."""
    return [where for where in connect_calls(sources) if not where.startswith(f"{OPENER}:")]


def test_only_the_one_opener_calls_sqlite3_connect() -> None:
    sources = product_sources()
    assert outside_the_opener(sources) == []
    assert len(connect_calls(sources)) == 2  # the opener's: read-write and read-only


PLANTED: Final = {
    "plain": "import sqlite3\ndef open_it(p):\n    return sqlite3.connect(p)\n",
    "module alias": "import sqlite3 as lite\ndef open_it(p):\n    return lite.connect(p)\n",
    "from import": "from sqlite3 import connect as c\ndef open_it(p):\n    return c(p)\n",
    "assigned": "import sqlite3\nopen_db = sqlite3.connect\nagain = open_db\ndef open_it(p):\n    return again(p)\n",
    "dbapi2": "from sqlite3 import dbapi2\ndef open_it(p):\n    return dbapi2.connect(p)\n",
    "dotted": "import sqlite3.dbapi2\ndef open_it(p):\n    return sqlite3.dbapi2.connect(p)\n",
    "getattr": "import sqlite3\ndef open_it(p):\n    return getattr(sqlite3, 'connect')(p)\n",
}


def test_the_rule_fails_on_a_connect_planted_in_the_memory_store() -> None:
    planted_at = "orchestrator/memory/store.py"
    for how, text in PLANTED.items():
        line = text.splitlines().index(next(x for x in text.splitlines() if "return" in x)) + 1
        assert outside_the_opener({**product_sources(), planted_at: text}) == [f"{planted_at}:{line}"], how
