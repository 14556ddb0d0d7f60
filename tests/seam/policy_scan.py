"""The policy half of the seal scanner: agent policy read outside the seam, `resolve()` reached, channels' imports."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Final, TypeGuard

from tests.seam.scan_source import ROOT, Source
from tests.seam.seal_scan import GETTERS, SEAM, is_config

POLICY_OWNERS: Final = (SEAM, "orchestrator/config/", "orchestrator/checks/")
AGENT_POLICY_MODELS: Final = frozenset({
    "AgentConfig", "ApprovalConfig", "BudgetConfig", "MemoryConfig", "ShellConfig", "HttpFetchConfig",
})
# Agent policy fields: read only by the seam (and validated by config/ and cross-checked by checks/).
POLICY_FIELDS: Final = frozenset({
    "tools", "excluded_tools", "approval", "budget", "memory", "skills", "mcp_bundles", "peripherals",
    "delegates", "autonomy", "temperature", "system_prompt", "auto_approve", "always_ask", "shell",
    "http_fetch", "acp_enable_mcp", "workspace",
})
# Calls that see only the agents' names (or their count).
NAME_ONLY_CALLS: Final = frozenset({"len", "sorted", "list", "set", "frozenset", "tuple", "iter"})
AGENTS_KEY: Final = "agents"
# What turns a whole config into data or a changed copy, so the agents come out by their key.
CONFIG_DUMPS: Final = frozenset({
    "model_dump", "model_dump_json", "model_copy", "model_construct", "dict", "copy", "json", "__iter__",
    "__repr_args__", "__rich_repr__", "__pretty__", "__getstate__",
})
CONFIG_SOURCES: Final = frozenset({"load_config", "parse_config", "read_config", "validate_config"})


def config_names(src: Source) -> set[str]:
    """Local names that hold a config: assigned from one, loaded, or annotated `Config`."""
    names = set()
    for node in src.nodes:
        if isinstance(node, ast.arg) and node.annotation is not None:
            if re.search(r"\bConfig\b", ast.unparse(node.annotation)):
                names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if re.search(r"\bConfig\b", ast.unparse(node.annotation)):
                names.add(node.target.id)
    for name, values in src._bound.items():
        for value in values:
            loaded = isinstance(value, ast.Call) and {
                q.rsplit(".", 1)[-1] for q in src.qualnames(value.func)
            } & CONFIG_SOURCES
            if is_config(value) or loaded:
                names.add(name)
    return names


def policy_reads(src: Source) -> list[str]:
    """Every place a module reads agent policy: imports, `.agents` lookups, policy fields, the agents by key."""
    bad: list[str] = []
    configs = config_names(src)

    def holds_config(node: ast.AST) -> bool:
        return is_config(node) or (isinstance(node, ast.Name) and node.id in configs)

    tainted: set[str] = set()
    for node in src.nodes:  # names bound from anything derived from `.agents`
        if isinstance(node, ast.For | ast.comprehension) and _mentions_agents(node.iter):
            tainted |= _bound_names(node.target)
        elif isinstance(node, ast.Assign) and _mentions_agents(node.value):
            for target in node.targets:
                tainted |= _bound_names(target)
    modules_here = _module_names(src)  # `handlers.agents` is a module's function, not a config's agents
    for node in src.nodes:
        where = src.where(node)
        if isinstance(node, ast.ImportFrom) and src.absolute(node).startswith("orchestrator.config"):
            bad += [f"{where}: imports {a.name}" for a in node.names if a.name in AGENT_POLICY_MODELS]
        if isinstance(node, ast.Attribute) and node.attr in POLICY_FIELDS and (
            _mentions_agents(node.value) or (isinstance(node.value, ast.Name) and node.value.id in tainted)
        ):
            bad.append(f"{where}: reads .{node.attr} of an agent's config")
        bad += _agents_by_key(src, node, where)
        bad += _config_dumped(src, node, where, holds_config)
        if not _is_agents(node) or (isinstance(node.value, ast.Name) and node.value.id in modules_here):
            continue
        parent = src.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            bad.append(f"{where}: indexes config.agents")
        elif isinstance(parent, ast.Attribute) and parent.value is node:
            bad.append(f"{where}: reads config.agents.{parent.attr}()")
        elif isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func.id if isinstance(parent.func, ast.Name) else ast.unparse(parent.func)
            if func not in NAME_ONLY_CALLS:
                bad.append(f"{where}: passes config.agents to {func}()")
        elif isinstance(parent, ast.keyword) and holds_config(node.value):
            bad.append(f"{where}: passes config.agents as {parent.arg}=")
        elif not (
            (isinstance(parent, ast.Compare) and all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops))
            or (isinstance(parent, ast.For | ast.comprehension) and parent.iter is node)
            or isinstance(parent, ast.keyword)
        ):
            bad.append(f"{where}: uses config.agents ({type(parent).__name__})")
    return bad


def _module_names(src: Source) -> set[str]:
    """Names this module binds to modules: `import x` ones, and `from pkg import mod` of our own modules."""
    names = set()
    for node in src.nodes:
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = src.absolute(node).replace(".", "/")
            for a in node.names:
                target = ROOT / base / a.name
                if target.with_suffix(".py").is_file() or (target / "__init__.py").is_file():
                    names.add(a.asname or a.name)
    return names


def _agents_by_key(src: Source, node: ast.AST, where: str) -> list[str]:
    """`getattr(config, "ag" + "ents")`, `dump["agents"]`, `attrgetter("agents")`: the agents by their key."""
    if isinstance(node, ast.Subscript) and _is_agents_key(src, node.slice):
        return [f"{where}: indexes ['agents']"]
    if not isinstance(node, ast.Call):
        return []
    if any(_is_agents_key(src, a) for a in node.args):
        getters = {q.rsplit(".", 1)[-1] for q in src.qualnames(node.func)} & GETTERS
        if isinstance(node.func, ast.Attribute) and node.func.attr in GETTERS:
            return [f"{where}: reads 'agents' through .{node.func.attr}()"]
        if getters:
            return [f"{where}: reads 'agents' through {sorted(getters)[0]}()"]
    # A getter handed to another call with the key among the data: `reduce(getattr, ["agents", ...], config)`.
    handed = {q.rsplit(".", 1)[-1] for a in node.args if isinstance(a, ast.Name | ast.Attribute) for q in src.qualnames(a)}
    if handed & GETTERS and any(_is_agents_key(src, n) for a in node.args for n in _data_of(src, a)):
        return [f"{where}: reads 'agents' through {sorted(handed & GETTERS)[0]} handed to {ast.unparse(node.func)}()"]
    return []


def _data_of(src: Source, node: ast.expr) -> list[ast.AST]:
    """The nodes of `node`, and of what a name in it is bound to."""
    found = list(ast.walk(node))
    for name in [n for n in found if isinstance(n, ast.Name)]:
        found += [d for value in src._bound.get(name.id, []) for d in ast.walk(value)]
    return found


def _is_agents_key(src: Source, node: ast.AST) -> bool:
    key = src.fold(node)
    return key is not None and (key == AGENTS_KEY or key.startswith(f"{AGENTS_KEY}."))


def _config_dumped(src: Source, node: ast.AST, where: str, holds_config: Callable[[ast.AST], bool]) -> list[str]:
    """`config.model_dump()`, `dict(config)`, `vars(config)`, `for k, v in config`: the whole config as data."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CONFIG_DUMPS and holds_config(func.value):
            return [f"{where}: dumps or rebuilds the config ({func.attr})"]
        if src.qualnames(func) & {"dict", "vars", "iter", "list", "tuple"} and node.args and holds_config(node.args[0]):
            return [f"{where}: dumps or rebuilds the config ({ast.unparse(func)}(...))"]
    if isinstance(node, ast.For | ast.comprehension) and holds_config(node.iter):
        return [f"{where}: iterates over the config"]
    return []


def _is_agents(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return isinstance(node, ast.Attribute) and node.attr == AGENTS_KEY


def _mentions_agents(node: ast.AST) -> bool:
    return any(_is_agents(n) for n in ast.walk(node))


def _bound_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


RESOLVE_NAMES: Final = frozenset({
    "orchestrator.seam.resolve", "orchestrator.seam._resolve", "orchestrator.seam.resolve.resolve",
    "orchestrator.seam.resolve._resolve",
})


def reaches_resolve(src: Source) -> list[str]:
    """Production reaches `resolve()` only through its path's builder: never calls, imports or holds it."""
    bad = set()
    for node in src.nodes:
        if isinstance(node, ast.Import | ast.ImportFrom) and src.imported(node) & RESOLVE_NAMES:
            bad.add(f"{src.where(node)}: imports resolve")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and (
            src.absolute(node) == "orchestrator.seam" or src.absolute(node).startswith("orchestrator.seam.")
        ):
            bad.add(f"{src.where(node)}: imports resolve (with *)")
        if isinstance(node, ast.Call) and {q.rsplit(".", 1)[-1] for q in src.qualnames(node.func)} & {
            "attrgetter", "methodcaller"
        } and any(src.fold(a) in {"resolve", "_resolve"} for a in node.args):
            bad.add(f"{src.where(node)}: reaches resolve() by its name")
        elif isinstance(node, ast.Name | ast.Attribute | ast.Call) and src.qualnames(node) & RESOLVE_NAMES:
            parent = src.parents.get(node)
            if not (isinstance(parent, ast.Attribute) and src.qualnames(parent) & RESOLVE_NAMES):
                bad.add(f"{src.where(node)}: reaches resolve() (use the path's builder)")
        if isinstance(node, ast.Call) and _calls_seam_resolve(node.func):
            bad.add(f"{src.where(node)}: calls resolve() (use the path's builder)")
    return sorted(bad)


def _calls_seam_resolve(func: ast.expr) -> bool:
    """`resolve(...)` or `seam.resolve(...)` (a path's `.resolve()` is a method of something else)."""
    if isinstance(func, ast.Name):
        return func.id == "resolve"
    return isinstance(func, ast.Attribute) and func.attr in {"resolve", "_resolve"} and "seam" in ast.unparse(func.value)


CHANNEL_FORBIDDEN: Final = ("orchestrator.seam", "orchestrator.policy", "orchestrator.tools")


def channel_imports(src: Source) -> list[str]:
    """`channels/` imports nothing of policy, seam or tools (statically, relatively or dynamically)."""
    bad = set()
    for node, imported in src.imports():
        for name in imported:
            if any(name == f or name.startswith(f"{f}.") for f in CHANNEL_FORBIDDEN):
                bad.add(f"{src.where(node)}: imports {name}")
    return sorted(bad)
