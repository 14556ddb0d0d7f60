"""Architecture rules, checked on the source: policy is read and sealed objects built only in the seam."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEALED = {"ScopedToolRegistry", "ResolvedAgentExecution", "ApprovalManager"}
AGENT_POLICY_MODELS = {
    "AgentConfig", "ApprovalConfig", "BudgetConfig", "MemoryConfig", "ShellConfig", "HttpFetchConfig",
}
POLICY_OWNERS = ("orchestrator/seam/", "orchestrator/config/", "orchestrator/checks/")
# Agent policy fields: read only by the seam (and validated by config/ and cross-checked by checks/).
POLICY_FIELDS = {
    "tools", "excluded_tools", "approval", "budget", "memory", "skills", "mcp_bundles", "peripherals",
    "delegates", "autonomy", "temperature", "system_prompt", "auto_approve", "always_ask", "shell",
    "http_fetch", "acp_enable_mcp", "workspace",
}
# Calls that see only the agents' names (or their count).
NAME_ONLY_CALLS = {"len", "sorted", "list", "set", "frozenset", "tuple", "iter"}
# Private modules and what only their own package may import.
PRIVATE_MODULES = {"orchestrator.seam._seal": "orchestrator/seam/", "orchestrator.config.models": "orchestrator/config/"}
# The names a config holds agents under, however they are spelled.
AGENTS_KEY = "agents"
EXECUTION_FIELDS = (
    "identity", "model", "provider", "security", "tools", "approvals", "knobs", "context", "assembly", "memory",
    "skills", "mcp_bundles", "prompt_sections", "system_prompt", "ledger", "usage",
)


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


def test_private_modules_are_imported_only_inside_their_package() -> None:
    """The seal token stays in the seam; other packages take config models from `orchestrator.config`."""
    bad = [line for rel, tree in modules("orchestrator", "channels") for line in private_imports(rel, tree)]
    assert bad == []


def test_nobody_outside_the_seam_alters_or_reseals_a_sealed_object() -> None:
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if not rel.startswith("orchestrator/seam/"):
            bad += seal_violations(rel, tree)
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
        if not rel.startswith(POLICY_OWNERS):
            bad += policy_violations(rel, tree)
    assert bad == []


def test_production_enters_resolve_only_through_the_path_builders() -> None:
    """Call sites call their path's builder (the matrix uses the same ones), never resolve() inline."""
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith("orchestrator/seam/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _calls_seam_resolve(node.func):
                bad.append(f"{rel}:{node.lineno}: calls resolve() (use the path's builder)")
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator.seam"):
                bad += [f"{rel}:{node.lineno}: imports resolve" for a in node.names if a.name in {"resolve", "_resolve"}]
    assert bad == []


def test_sealed_objects_refuse_construction_without_the_seam_token() -> None:
    from orchestrator.errors import SealViolation
    from orchestrator.policy import Interactivity
    from orchestrator.seam import (
        ApprovalManager,
        ResolvedAgentExecution,
        ScopedToolRegistry,
    )

    attempts = {
        "ScopedToolRegistry": lambda: ScopedToolRegistry(tools={}, prompt_sections=(), seal=object()),
        "ApprovalManager": lambda: ApprovalManager(
            agent="a", autonomy="full", auto_approve=(), always_ask=(), timeout_s=1,
            interactivity=Interactivity.NON_INTERACTIVE, audit=None, seal=object(),
        ),
        "ResolvedAgentExecution": lambda: ResolvedAgentExecution(seal=object(), **dict.fromkeys(EXECUTION_FIELDS)),
    }
    for kind, attempt in attempts.items():
        with pytest.raises(SealViolation) as caught:
            attempt()
        assert caught.value.kind == kind
    assert set(attempts) == SEALED


def test_the_rules_catch_planted_violations() -> None:
    """The scanners themselves: every planted violation is found, the allowed name-only uses are not."""
    planted = {
        "policy = config.agents['ops'].excluded_tools": "indexes",
        "policy = runtime.config.agents[name]": "indexes",
        "agent = config.agents.get('ops')": "agents.get()",
        "for name, agent in cfg.agents.items(): pass": "agents.items()",
        "for agent in config.agents.values(): print(agent.tools)": "agents.values()",
        "agents = dict(config.agents)": "passes config.agents to dict()",
        "a = getattr(self.config.agents, 'ops')": "passes config.agents to getattr()",
        "a = next(iter(config.agents)); print(a.mcp_bundles)": "reads .mcp_bundles",
        "from orchestrator.config.models import AgentConfig": "imports AgentConfig",
        "x = [a.budget for a in config.agents]": "reads .budget",
        "agents = getattr(config, 'agents')": "reads 'agents' through getattr()",
        "agents = config.model_dump()['agents']": "indexes ['agents']",
        "ops = runtime.config.model_dump().get('agents')": "reads 'agents' through .get()",
        "helper(agents=config.agents)": "passes config.agents as agents=",
        "helper(x, agents=self.runtime.config.agents)": "passes config.agents as agents=",
    }
    for source, expected in planted.items():
        found = policy_violations("planted.py", ast.parse(source))
        assert any(expected in line for line in found), (source, found)
    allowed = (
        "n = len(config.agents)\nnames = sorted(self.config.agents)\nok = name in config.agents\n"
        "for name in sorted(config.agents): print(name)\nstore.recall(q, agents=self.agents)\n"
        "print(json.dumps({'agents': grids}))\n"
    )
    assert policy_violations("allowed.py", ast.parse(allowed)) == []
    sealing = {
        "from orchestrator.seam._seal import SEAL": "imports orchestrator.seam._seal",
        "from orchestrator.seam import _seal": "imports orchestrator.seam._seal",
        "import orchestrator.seam._seal as s": "imports orchestrator.seam._seal",
        "from orchestrator.config.models import Config": "imports orchestrator.config.models",
        "from orchestrator.config import models": "imports orchestrator.config.models",
    }
    for source, expected in sealing.items():
        found = private_imports("orchestrator/engine/planted.py", ast.parse(source))
        assert any(expected in line for line in found), (source, found)
    assert private_imports("orchestrator/seam/planted.py", ast.parse("from orchestrator.seam._seal import SEAL")) == []
    assert private_imports("orchestrator/x.py", ast.parse("from orchestrator.config import Config, SecretRef")) == []
    altering = {
        "object.__setattr__(execution, 'tools', mine)": "object.__setattr__ on execution",
        "object.__setattr__(runtime.execution.approvals, '_autonomy', 'full')": "object.__setattr__ on",
        "ex = dataclasses.replace(execution, tools=mine, seal=SEAL)": "passes seal=",
        "ex = replace(execution, seal=token)": "passes seal=",
        "ScopedToolRegistry.__init__(reg, tools={}, prompt_sections=(), seal=s)": "passes seal=",
    }
    for source, expected in altering.items():
        found = seal_violations("planted.py", ast.parse(source))
        assert any(expected in line for line in found), (source, found)
    own_cache = "class T:\n    def __post_init__(self) -> None:\n        object.__setattr__(self, '_wire', 1)\n"
    assert seal_violations("allowed.py", ast.parse(own_cache)) == []
    tree = ast.parse("reg = ScopedToolRegistry(tools={})\n")
    assert [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in SEALED]


def private_imports(rel: str, tree: ast.Module) -> list[str]:
    """Return every import of a private module (`PRIVATE_MODULES`) from outside its package."""
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = set(imported_modules(ast.Module(body=[node], type_ignores=[])))
        for private, owner in PRIVATE_MODULES.items():
            if not rel.startswith(owner) and any(n == private or n.startswith(f"{private}.") for n in names):
                bad.append(f"{rel}:{node.lineno}: imports {private}")
    return bad


def seal_violations(rel: str, tree: ast.Module) -> list[str]:
    """Return every `object.__setattr__` on another object and every call passing `seal=`."""
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        where = f"{rel}:{node.lineno}"
        func = node.func
        if (
            isinstance(func, ast.Attribute) and func.attr == "__setattr__"
            and isinstance(func.value, ast.Name) and func.value.id == "object"
            and node.args and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        ):
            bad.append(f"{where}: object.__setattr__ on {ast.unparse(node.args[0])}")
        if any(k.arg == "seal" for k in node.keywords):
            bad.append(f"{where}: passes seal= to {ast.unparse(func)}()")
    return bad


def policy_violations(rel: str, tree: ast.Module) -> list[str]:
    """Return every place `tree` reads agent policy: imports, `.agents` lookups, policy fields."""
    bad: list[str] = []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    tainted: set[str] = set()
    modules_here = {  # `handlers.agents` is a module's function, not a config's agents
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names
    }
    for node in ast.walk(tree):  # names bound from anything derived from `.agents`
        if isinstance(node, (ast.For, ast.comprehension)) and _mentions_agents(node.iter):
            tainted |= _bound_names(node.target)
        elif isinstance(node, ast.Assign) and _mentions_agents(node.value):
            for target in node.targets:
                tainted |= _bound_names(target)
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator.config"):
            bad += [f"{where}: imports {a.name}" for a in node.names if a.name in AGENT_POLICY_MODELS]
        if isinstance(node, ast.Attribute) and node.attr in POLICY_FIELDS and (
            _mentions_agents(node.value) or (isinstance(node.value, ast.Name) and node.value.id in tainted)
        ):
            bad.append(f"{where}: reads .{node.attr} of an agent's config")
        bad += _agents_by_name(node, where)
        if not _is_agents(node) or (isinstance(node.value, ast.Name) and node.value.id in modules_here):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            bad.append(f"{where}: indexes config.agents")
        elif isinstance(parent, ast.Attribute) and parent.value is node:
            bad.append(f"{where}: reads config.agents.{parent.attr}()")
        elif isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func.id if isinstance(parent.func, ast.Name) else ast.unparse(parent.func)
            if func not in NAME_ONLY_CALLS:
                bad.append(f"{where}: passes config.agents to {func}()")
        elif isinstance(parent, ast.keyword) and _is_config(node.value):
            bad.append(f"{where}: passes config.agents as {parent.arg}=")
        elif not (
            (isinstance(parent, ast.Compare) and all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops))
            or (isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node)
            or isinstance(parent, ast.keyword)
        ):
            bad.append(f"{where}: uses config.agents ({type(parent).__name__})")
    return bad


def _agents_by_name(node: ast.AST, where: str) -> list[str]:
    """`getattr(config, "agents")`, `dump["agents"]`, `dump.get("agents")`: the agents by their key."""
    if isinstance(node, ast.Subscript) and _is_agents_key(node.slice):
        return [f"{where}: indexes ['agents']"]
    if not isinstance(node, ast.Call) or not any(_is_agents_key(a) for a in node.args):
        return []
    if isinstance(node.func, ast.Name) and node.func.id in {"getattr", "setattr", "hasattr", "attrgetter"}:
        return [f"{where}: reads 'agents' through {node.func.id}()"]
    if isinstance(node.func, ast.Attribute) and node.func.attr in {"get", "pop", "setdefault", "__getitem__"}:
        return [f"{where}: reads 'agents' through .{node.func.attr}()"]
    return []


def _is_agents_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == AGENTS_KEY


def _is_config(node: ast.AST) -> bool:
    """`config`, `cfg`, `self.config`, `runtime.config`: what holds the agents' raw config."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "config" in name.lower() or name.lower() in {"cfg", "conf"}


def _is_agents(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "agents"


def _mentions_agents(node: ast.AST) -> bool:
    return any(_is_agents(n) for n in ast.walk(node))


def _bound_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _calls_seam_resolve(func: ast.expr) -> bool:
    """`resolve(...)` or `seam.resolve(...)` (a path's `.resolve()` is a method of something else)."""
    if isinstance(func, ast.Name):
        return func.id == "resolve"
    return isinstance(func, ast.Attribute) and func.attr == "resolve" and "seam" in ast.unparse(func.value)
