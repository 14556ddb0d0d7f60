"""Architecture rules, checked on the source: policy is read and sealed objects built only in the seam."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEALED = {"ScopedToolRegistry", "ResolvedAgentExecution", "ApprovalManager"}
AGENT_POLICY_MODELS = {
    "AgentConfig", "ApprovalConfig", "BudgetConfig", "MemoryConfig", "ShellConfig", "HttpFetchConfig",
}
POLICY_OWNERS = ("orchestrator/seam/", "orchestrator/config/")


def modules(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def imported_modules(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_channels_never_import_policy_seam_or_tools() -> None:
    bad = [
        f"{rel}: imports {name}"
        for rel, tree in modules("channels")
        for name in imported_modules(tree)
        if name.startswith(("orchestrator.seam", "orchestrator.policy", "orchestrator.tools"))
    ]
    assert bad == []


def test_only_the_seam_constructs_sealed_objects() -> None:
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith("orchestrator/seam/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in SEALED:
                    bad.append(f"{rel}:{node.lineno}: constructs {name}")
    assert bad == []


def test_agent_policy_is_read_only_in_the_seam() -> None:
    """Outside seam/ and config/, nobody holds an agent's raw config to re-derive policy."""
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith(POLICY_OWNERS):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator.config"):
                bad += [f"{rel}:{node.lineno}: imports {a.name}" for a in node.names if a.name in AGENT_POLICY_MODELS]
            if isinstance(node, ast.Subscript) and _is_agents(node.value):
                bad.append(f"{rel}:{node.lineno}: indexes config.agents")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"get", "items", "values"}
                and _is_agents(node.func.value)
            ):
                bad.append(f"{rel}:{node.lineno}: reads config.agents.{node.func.attr}()")
    assert bad == []


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The scanner itself: a planted violation is found (guards against a scanner that sees nothing)."""
    tree = ast.parse("policy = config.agents['ops'].excluded_tools\nreg = ScopedToolRegistry(tools={})\n")
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and _is_agents(n.value)]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in SEALED]
    assert len(found) == 1 and len(calls) == 1


def _is_agents(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "agents"
