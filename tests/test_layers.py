"""The layer contract: no module imports a layer above its own, and no two packages import each other.

Every import counts: module-level, function-local (a lazy import hides a dependency, it
does not remove it) and `if TYPE_CHECKING:` ones too (a type-only import still ties the
lower package to the upper one's names, mypy follows it, and it is how the cycles this
test exists for began). The only lazy imports the contract names are the CLI's, which
keep `orchestrator --help` fast.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
# `channels` (the chat platform adapters) is a top-level package beside `orchestrator`.
SOURCES: Final = ("orchestrator", "channels")

# The layers, bottom first. Each entry is one unit: a top-level module or package under
# orchestrator/ (or `channels`). A module may import its own layer and the layers below;
# two units of one layer may import each other in one direction only (no cycles).
# To move a unit, move its name; a new package must be placed here before its test passes.
LAYERS: Final = (
    # Leaves: no orchestrator imports but each other's.
    ("base", ("errors", "redaction", "logs", "text", "threads", "workspace_io", "private", "lifecycle", "status_client")),
    # Parses and validates its own models only.
    ("config", ("config",)),
    ("policy", ("policy",)),
    # What a resolved execution is made of: tools and their sources, model providers,
    # the stores, and the platform adapters (which see config and errors only).
    ("domain", ("tools", "mcp", "memory", "skills", "peripherals", "providers", "store", "channels", "media")),
    # Cross-references between config sections and the domain packages; `load_config`.
    ("checks", ("checks",)),
    # `check --connect`: secrets, MCP, providers and channels probed once, from this environment.
    ("doctor", ("doctor",)),
    # `orchestrator init`: questions, each answer checked with the doctor's probes, then the doctor.
    ("init", ("init",)),
    # `orchestrator service install`: the documented systemd steps, then the doctor (as a process).
    ("service", ("service",)),
    ("seam", ("seam",)),
    ("engine", ("engine",)),
    # The one turn runner: session lock, transcript, engine, persist, turn hooks.
    ("sessions", ("sessions",)),
    # Metrics and traces: observers on the turn runner, the provider pool and the audit sink.
    ("observability", ("observability",)),
    # What runs turns for somebody. The gateway and the scheduler reach the daemon through
    # protocols of their own (`GatewayHost`, `ScheduleHost`), never by import.
    ("services", ("daemon", "gateway", "acp", "scheduler", "sop", "library")),
    # `orchestrator` is the package's own __init__ (it imports `orchestrator.Agent` lazily);
    # `__main__` is `python -m orchestrator`.
    ("cli", ("cli", "__main__", "orchestrator")),
)

# (importing module, imported module) pairs the contract allows although they climb or
# close a cycle. Each says why; an entry that no longer matches an import fails the test.
KNOWN_EXCEPTIONS: Final[frozenset[tuple[str, str]]] = frozenset()

# The CLI imports nothing of orchestrator at module level (so `--help` stays fast); these
# are the modules it imports inside its commands. Add a new one here deliberately.
CLI_LAZY_IMPORTS: Final = frozenset({
    "orchestrator.acp",
    "orchestrator.checks",
    "orchestrator.daemon",
    "orchestrator.doctor",
    "orchestrator.engine",
    "orchestrator.errors",
    "orchestrator.init",
    "orchestrator.logs",
    "orchestrator.policy",
    "orchestrator.redaction",
    "orchestrator.scheduler",
    "orchestrator.seam",
    "orchestrator.sessions",  # `orchestrator agent` runs its turn through `Sessions`
    "orchestrator.service",
    "orchestrator.sop",
    "orchestrator.status_client",  # `orchestrator status` asks the daemon without importing it
    "orchestrator.store",  # `orchestrator usage` reads the usage table
    "orchestrator.text",
    "orchestrator.threads",  # the TTY approver reads stdin on the blocking pool
})


# (importing module, imported module) pairs that reach past a package's `__init__` (or
# take a name its `__all__` does not list). Each entry is a one-line fix left to the work
# that owns the importing file, so the branches merge cleanly.
SURFACE_EXCEPTIONS: Final = frozenset({
    # The adapters (the approval codec work edits them): `orchestrator.config` exports these now.
    ("channels.discord", "orchestrator.config.channels"),
    ("channels.discord", "orchestrator.config.secrets"),
    ("channels.slack", "orchestrator.config.channels"),
    ("channels.telegram", "orchestrator.config.channels"),
})


@dataclass(frozen=True, slots=True, kw_only=True)
class Import:
    """One import statement's target, where it is, and how it is written."""

    source: str  # the importing module
    target: str  # the imported module (the longest dotted prefix that is a module)
    line: int
    lazy: bool  # inside a function
    type_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        how = " (function-local)" if self.lazy else " (type-only)" if self.type_only else ""
        return f"{self.source}:{self.line} imports {self.target}{how}"


def discover() -> dict[str, Path]:
    """Return every module under SOURCES by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(module: str, tree: ast.Module, known: Iterable[str]) -> Iterator[Import]:
    """Yield every import of a known module in `tree`, wherever the statement is."""
    known = frozenset(known)
    is_package = module in known and any(k.startswith(f"{module}.") for k in known)
    yield from _walk(module, is_package, tree.body, known, lazy=False, type_only=False)


def _walk(
    module: str, is_package: bool, body: list[ast.stmt], known: frozenset[str], *, lazy: bool, type_only: bool
) -> Iterator[Import]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in sorted(set(_targets(module, is_package, node, known))):
                yield Import(source=module, target=target, line=node.lineno, lazy=lazy, type_only=type_only)
            continue
        inner_lazy = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        checking = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()):
                stmts = child.body if isinstance(child, ast.ExceptHandler | ast.match_case) else [child]
                yield from _walk(
                    module, is_package, stmts, known,
                    lazy=inner_lazy, type_only=type_only or (checking and field == "body"),
                )


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: frozenset[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            anchor = parts if is_package else parts[:-1]
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def unit_of(module: str) -> str:
    """`orchestrator.seam.resolve` -> `seam`; `orchestrator` -> `orchestrator`; `channels.x` -> `channels`."""
    parts = module.split(".")
    return parts[1] if parts[0] == "orchestrator" and len(parts) > 1 else parts[0]


def layer_index() -> dict[str, int]:
    """Return unit -> layer number (0 = bottom)."""
    index: dict[str, int] = {}
    for number, (_, units) in enumerate(LAYERS):
        for unit in units:
            assert unit not in index, f"{unit!r} is in two layers"
            index[unit] = number
    return index


def climbs(imports: Iterable[Import], layers: Mapping[str, int]) -> list[str]:
    """Return one line per import of a unit in a higher layer than the importer's."""
    names = [name for name, _ in LAYERS]
    return [
        f"{imp}: layer {names[layers[unit_of(imp.source)]]!r} may not import {unit_of(imp.target)!r} "
        f"(layer {names[layers[unit_of(imp.target)]]!r})"
        for imp in imports
        if layers[unit_of(imp.target)] > layers[unit_of(imp.source)]
    ]


def cycles(imports: Iterable[Import]) -> list[list[str]]:
    """Return each group of units that import each other (directly or round a loop), sorted."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        a, b = unit_of(imp.source), unit_of(imp.target)
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(unit: str) -> None:  # Tarjan's strongly connected components
        order[unit] = low[unit] = len(order)
        stack.append(unit)
        for other in sorted(graph[unit]):
            if other not in order:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], order[other])
        if low[unit] == order[unit]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == unit:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for unit in sorted(graph):
        if unit not in order:
            visit(unit)
    return sorted(groups)


def all_imports() -> list[Import]:
    """Return every import between known modules in the scanned sources."""
    known = discover()
    found: list[Import] = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found.extend(imports_of(module, tree, known))
    return found


def test_every_unit_has_a_layer() -> None:
    layers = layer_index()
    missing = sorted({unit_of(m) for m in discover()} - set(layers))
    assert missing == [], f"place these in LAYERS: {missing}"


def test_no_import_climbs_a_layer() -> None:
    imports = [i for i in all_imports() if (i.source, i.target) not in KNOWN_EXCEPTIONS]
    assert climbs(imports, layer_index()) == []


def test_no_two_packages_import_each_other() -> None:
    imports = [i for i in all_imports() if (i.source, i.target) not in KNOWN_EXCEPTIONS]
    found = cycles(imports)
    detail = [
        str(i) for i in imports
        if any({unit_of(i.source), unit_of(i.target)} <= set(group) for group in found)
        and unit_of(i.source) != unit_of(i.target)
    ]
    assert found == [], "\n".join(detail)


def test_every_known_exception_is_still_needed() -> None:
    """An exception whose import is gone (or no longer climbs or closes a cycle) must be removed."""
    imports = all_imports()
    present = {(i.source, i.target) for i in imports}
    assert sorted(KNOWN_EXCEPTIONS - present) == []
    allowed = [i for i in imports if (i.source, i.target) not in KNOWN_EXCEPTIONS]
    for source, target in sorted(KNOWN_EXCEPTIONS):
        edge = next(i for i in imports if (i.source, i.target) == (source, target))
        needed = climbs([edge], layer_index()) or cycles([*allowed, edge])
        assert needed, f"{source} -> {target} neither climbs nor closes a cycle: drop it from KNOWN_EXCEPTIONS"


def test_the_cli_imports_orchestrator_only_lazily() -> None:
    """`--help` needs none of the package: every CLI import of it is inside a command."""
    cli = [i for i in all_imports() if i.source == "orchestrator.cli"]
    assert [str(i) for i in cli if not i.lazy and not i.type_only] == []
    assert {i.target for i in cli if i.lazy} == CLI_LAZY_IMPORTS


def surface_violations(known: Mapping[str, Path]) -> list[tuple[str, str, str]]:
    """Return (importer, imported, why) for each import that bypasses a package's `__all__`."""
    exported = {module: _all_of(path) for module, path in known.items()}
    found: list[tuple[str, str, str]] = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            target, unit = node.module, _unit_root(node.module)
            if unit not in known or unit == _unit_root(module) or target == "orchestrator":
                continue
            where = f"{module}:{node.lineno}"
            if target != unit and path_is_package(known[unit]):
                found.append((module, target, f"{where}: imports {target} (import from {unit})"))
                continue
            listed = exported.get(target)
            missing = [a.name for a in node.names if listed is not None and a.name not in listed]
            if missing:
                found.append((module, target, f"{where}: {target}.__all__ does not list {', '.join(missing)}"))
    return found


def path_is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _unit_root(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "orchestrator" and len(parts) > 1 else parts[0]


def _all_of(path: Path) -> frozenset[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return None


def test_packages_import_each_other_only_through_their_all() -> None:
    """House style 3: another package is imported from its `__init__`, and only names in `__all__`."""
    found = surface_violations(discover())
    assert [why for importer, target, why in found if (importer, target) not in SURFACE_EXCEPTIONS] == []
    assert sorted(SURFACE_EXCEPTIONS - {(importer, target) for importer, target, _ in found}) == []


def test_the_rules_catch_planted_violations() -> None:
    """The scanner finds function-local and TYPE_CHECKING imports; climbs and cycles are reported."""
    known = {
        "orchestrator", "orchestrator.config", "orchestrator.config.models", "orchestrator.seam",
        "orchestrator.seam.resolve", "orchestrator.engine", "orchestrator.tools", "orchestrator.cli",
    }
    planted = (
        "from typing import TYPE_CHECKING\n"
        "from . import models\n"
        "if TYPE_CHECKING:\n    from orchestrator.seam import resolve\n"
        "def check() -> None:\n    from orchestrator.engine import run_tool_call_loop\n"
        "class Later:\n    async def go(self) -> None:\n        import orchestrator.cli\n"
        "try:\n    pass\nexcept ImportError:\n    from orchestrator.tools import Tool\n"
    )
    found = list(imports_of("orchestrator.config.loader", ast.parse(planted), known))
    assert [(i.target, i.lazy, i.type_only) for i in found] == [
        ("orchestrator.config.models", False, False),
        ("orchestrator.seam.resolve", False, True),
        ("orchestrator.engine", True, False),
        ("orchestrator.cli", True, False),
        ("orchestrator.tools", False, False),
    ]
    reported = climbs(found, layer_index())
    assert [line.split(" imports ")[1].split(":")[0].split(" ")[0] for line in reported] == [
        "orchestrator.seam.resolve", "orchestrator.engine", "orchestrator.cli", "orchestrator.tools",
    ]
    assert "orchestrator.config.loader:6 imports orchestrator.engine (function-local)" in reported[1]
    loop = [
        Import(source="orchestrator.gateway.app", target="orchestrator.runtime", line=1, lazy=False, type_only=False),
        Import(source="orchestrator.runtime", target="orchestrator.acp", line=1, lazy=True, type_only=False),
        Import(source="orchestrator.acp.server", target="orchestrator.gateway", line=1, lazy=False, type_only=True),
        Import(source="orchestrator.sop", target="orchestrator.seam", line=1, lazy=False, type_only=False),
    ]
    assert cycles(loop) == [["acp", "gateway", "runtime"]]
    assert cycles(loop[:2]) == []


def test_the_surface_rule_catches_planted_violations(tmp_path: Path) -> None:
    """A deep import and a name missing from `__all__` are reported; an exported name is not."""
    files = {
        "orchestrator.seam": ("__init__.py", '__all__ = ["resolve"]\nfrom orchestrator.seam.resolve import resolve\n'),
        "orchestrator.seam.resolve": ("resolve.py", "def resolve() -> None: ...\n"),
        "orchestrator.engine.loop": ("loop.py", (
            "from orchestrator.seam import resolve\n"
            "from orchestrator.seam.resolve import resolve as deep\n"
            "def later() -> None:\n    from orchestrator.seam import _seal\n"
        )),
    }
    known: dict[str, Path] = {}
    for module, (name, text) in files.items():
        path = tmp_path / module.replace(".", "_") / name
        path.parent.mkdir()
        path.write_text(text)
        known[module] = path
    assert [why for _, _, why in surface_violations(known)] == [
        "orchestrator.engine.loop:2: imports orchestrator.seam.resolve (import from orchestrator.seam)",
        "orchestrator.engine.loop:4: orchestrator.seam.__all__ does not list _seal",
    ]
