"""The suite itself: every test checks an outcome that could fail."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

TESTS: Final = Path(__file__).resolve().parent
# calls that check an outcome: pytest.raises / pytest.warns / pytest.fail, and helpers named for it
CHECKING_CALLS: Final = frozenset({"raises", "warns", "fail"})
CHECKING_PREFIXES: Final = ("assert_", "expect_", "check_")

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _checks_directly(function: Function) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name in CHECKING_CALLS or name.startswith(CHECKING_PREFIXES):
                return True
    return False


def _module_functions(tree: ast.Module) -> Iterator[Function]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def unchecked_tests(source: str) -> list[str]:
    """Return the names of test functions in `source` that check nothing.

    A test checks something if it asserts, expects a raise or warning, calls a helper named
    `assert_*`/`expect_*`/`check_*`, or calls a function of the same module that does
    (followed to any depth).
    """
    functions = {f.name: f for f in _module_functions(ast.parse(source))}
    checking = {name for name, f in functions.items() if _checks_directly(f)}
    grew = True
    while grew:
        grew = False
        for name, function in functions.items():
            if name in checking:
                continue
            calls = {_called_name(n) for n in ast.walk(function) if isinstance(n, ast.Call)}
            if calls & checking:
                checking.add(name)
                grew = True
    return [name for name in functions if name.startswith("test_") and name not in checking]


def test_every_test_checks_an_outcome() -> None:
    unchecked = [
        f"{path.relative_to(TESTS.parent)}::{name}"
        for path in sorted(TESTS.rglob("test_*.py"))
        for name in unchecked_tests(path.read_text(encoding="utf-8"))
    ]
    assert unchecked == [], "tests without an assert, pytest.raises or a checking helper"


def test_the_scan_finds_a_test_that_checks_nothing() -> None:
    source = '''
async def _settle(x):
    await x.close()

def _verify(x):
    assert x

async def test_quiet(x):
    await _settle(x)

async def test_via_helper(x):
    _verify(x)

def test_raises(pytest):
    with pytest.raises(ValueError):
        int("x")

def test_named_helper(x):
    expect_reply(x, "hi")
'''
    assert unchecked_tests(source) == ["test_quiet"]
