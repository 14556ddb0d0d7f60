"""One turn runner: only `Sessions` (and the engine's own delegated child turns) call `run_tool_call_loop`.

Read from the source with `ast`: every call whose function resolves to the engine, by its
name, an import alias, a module attribute (`engine.run_tool_call_loop`), a simple assignment
(`f = run_tool_call_loop`), `getattr(engine, "run_tool_call_loop")` or
`functools.partial(run_tool_call_loop, ...)`, is a caller, named by its file and the
enclosing function. The self-test plants callers in the gateway and sees the pin fail.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Final

import pytest

from tests.source_files import product_sources

pytestmark = pytest.mark.slow

ENGINE: Final = "run_tool_call_loop"

# (file, enclosing function) of every call of the engine the house allows.
CALLERS: Final = frozenset({
    ("orchestrator/sessions/runner.py", "Sessions._run_held.engine"),  # a session's turn (`run_turn`)
    ("orchestrator/sessions/runner.py", "Sessions.run_child.body"),  # a child turn (an SOP step)
    ("orchestrator/engine/loop.py", "run_tool_call_loop.run_child"),  # a delegated turn, inside its parent's
})


def _names(node: ast.AST) -> str | None:
    """Return the name a `getattr(x, "name")` call or attribute reaches, else None."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


class _Scan(ast.NodeVisitor):
    """Find the calls of the engine in one module, with the function each is in."""

    def __init__(self, aliases: set[str]) -> None:
        self.aliases = aliases
        self.scope: list[str] = []
        self.found: list[tuple[str, int]] = []

    def resolves(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.aliases
        if _names(node) == ENGINE:
            return True
        # functools.partial(run_tool_call_loop, ...) (or any wrapper handed the engine first)
        return isinstance(node, ast.Call) and bool(node.args) and self.resolves(node.args[0])

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        if self.resolves(node.func):
            self.found.append((".".join(self.scope) or "<module>", node.lineno))
        self.generic_visit(node)


def _aliases(tree: ast.Module) -> set[str]:
    """Return the names bound to the engine in `tree`: imports `as`, and assignments, to a fixed point."""
    aliases = {ENGINE}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases.update(a.asname or a.name for a in node.names if a.name == ENGINE)
    scan = _Scan(aliases)
    while True:
        before = len(aliases)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and scan.resolves(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                aliases.update(t.id for t in targets if isinstance(t, ast.Name))
        if len(aliases) == before:
            return aliases


def callers(sources: Mapping[str, str]) -> set[tuple[str, str]]:
    """Return (file, enclosing function) of every call of the engine in `sources` (path: text)."""
    found: set[tuple[str, str]] = set()
    for path, text in sources.items():
        tree = ast.parse(text, filename=path)
        scan = _Scan(_aliases(tree))
        scan.visit(tree)
        found.update((path, where) for where, _ in scan.found)
    return found


def pin_problems(found: set[tuple[str, str]]) -> list[str]:
    """Return one line per caller the pin does not allow, and per allowed caller that is gone."""
    extra = [f"{path}: {where} calls {ENGINE}: run the turn through Sessions" for path, where in sorted(found - CALLERS)]
    gone = [f"{path}: {where} no longer calls {ENGINE}: update CALLERS" for path, where in sorted(CALLERS - found)]
    return extra + gone


def test_only_sessions_and_delegated_child_turns_call_the_engine() -> None:
    found = callers(product_sources())
    assert pin_problems(found) == []
    assert found == CALLERS


PLANTED: Final = {
    "direct": "from orchestrator.engine import run_tool_call_loop\n"
    "async def chat(e, t):\n    return await run_tool_call_loop(e, t, 'hi')\n",
    "alias": "from orchestrator.engine import run_tool_call_loop as turn\n"
    "async def chat(e, t):\n    return await turn(e, t, 'hi')\n",
    "module": "from orchestrator import engine\n"
    "async def chat(e, t):\n    return await engine.run_tool_call_loop(e, t, 'hi')\n",
    "assigned": "import orchestrator.engine as eng\nrun = eng.run_tool_call_loop\nagain = run\n"
    "async def chat(e, t):\n    return await again(e, t, 'hi')\n",
    "getattr": "from orchestrator import engine\n"
    "async def chat(e, t):\n    return await getattr(engine, 'run_tool_call_loop')(e, t, 'hi')\n",
    "partial": "import functools\nfrom orchestrator.engine import run_tool_call_loop as r\n"
    "go = functools.partial(r, approver=None)\n"
    "async def chat(e, t):\n    return await go(e, t, 'hi')\n",
}


def test_the_pin_fails_on_a_caller_planted_in_the_gateway() -> None:
    planted_at = "orchestrator/gateway/chat.py"
    for how, text in PLANTED.items():
        sources = {**product_sources(), planted_at: text}
        problems = pin_problems(callers(sources))
        assert problems == [f"{planted_at}: chat calls {ENGINE}: run the turn through Sessions"], how


def test_the_pin_fails_when_an_allowed_caller_is_gone() -> None:
    sources = product_sources()
    runner = "orchestrator/sop/runner.py"
    # an older SOP runner, calling the engine itself, and a Sessions without its child turns
    sources[runner] += "\nasync def _old(e, t):\n    return await run_tool_call_loop(e, t, 'step')\n"
    sessions = "orchestrator/sessions/runner.py"
    sources[sessions] = sources[sessions].replace("async def run_child(", "async def _unused(")
    assert pin_problems(callers(sources)) == [
        f"{sessions}: Sessions._unused.body calls {ENGINE}: run the turn through Sessions",
        f"{runner}: _old calls {ENGINE}: run the turn through Sessions",
        f"{sessions}: Sessions.run_child.body no longer calls {ENGINE}: update CALLERS",
    ]
