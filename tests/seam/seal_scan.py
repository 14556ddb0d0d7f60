"""The seal scanner: one rule per way around the seal, each over one parsed module (`Source`).

A rule returns one line per finding, `path:line: what`. Names are matched as `Source` sees
them: identifiers, attributes, imported names and constant-built strings alike, so
`getattr(m, "SE" + "AL")` names the token as `m.SEAL` does. What cannot be folded is refused
where a computed name could reach the seal (a dynamic import, a lookup on a config or on
one of our modules). The policy rules are in `policy_scan.py`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Final

from tests.seam.scan_source import DYNAMIC_IMPORTS, OUR_PACKAGES, ROOT, Source

SEAM: Final = "orchestrator/seam/"
SEALED: Final = frozenset({"ScopedToolRegistry", "ResolvedAgentExecution", "ApprovalManager"})
# What orchestrator/seam/_seal.py holds: the token, the mint ledger and the class guard.
SEAL_NAMES: Final = frozenset({"SEAL", "_seal", "_MINTED", "vouch", "vouched", "sealed_class"})
# Private modules and the only package that may import them.
PRIVATE_MODULES: Final = {"orchestrator.seam._seal": SEAM, "orchestrator.config.models": "orchestrator/config/"}
# Attribute lookups by name; the name is the second argument.
LOOKUPS: Final = frozenset({"getattr", "setattr", "delattr", "hasattr", "__getattribute__", "getattr_static"})
# Calls that take a key or an attribute name: the agents are not reached by their key through them.
GETTERS: Final = LOOKUPS | frozenset({
    "attrgetter", "itemgetter", "methodcaller", "__getattr__", "__getitem__", "get", "pop", "setdefault",
})
# Dunders that reach a function's globals, a frame's variables or raw memory: the token's hiding places.
INTROSPECTION: Final = frozenset({
    "__globals__", "__closure__", "cell_contents", "__code__", "__defaults__", "__kwdefaults__", "__builtins__",
    "f_globals", "f_locals", "f_builtins", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "_getframe",
    "getclosurevars", "get_referrers", "get_referents", "get_objects", "pythonapi", "py_object", "PyDLL",
    "from_address", "memmove", "getmembers", "getmembers_static", "getmodule",
})
DYNAMIC_CODE: Final = frozenset({"exec", "eval", "compile", "breakpoint"})
CODE_MODULES: Final = frozenset({"runpy", "code", "codeop", "marshal"})
# A reducer registered here is used before a class's own refusal to be copied or pickled.
COPY_MODULES: Final = frozenset({"copyreg"})
COPY_DUNDERS: Final = frozenset({
    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__copy__", "__deepcopy__", "__replace__",
})
SETATTR_DUNDERS: Final = frozenset({"__setattr__", "__delattr__"})
DESCRIPTOR_DUNDERS: Final = frozenset({"__set__", "__delete__", "getattr_static"})
_CODING: Final = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _names_private(text: str) -> str | None:
    for private in PRIVATE_MODULES:
        if text == private or text.startswith(f"{private}.") or private.replace(".", "/") in text:
            return private
    return None


def _ours(qualname: str) -> bool:
    return qualname.split(".")[0] in OUR_PACKAGES


Rule = Callable[[Source], list[str]]


def private_modules(src: Source) -> list[str]:
    """Nobody outside its package names a private module: by import (aliased, relative, `*`, dynamic) or string."""
    bad = set()
    named = [*src.imports(), *((node, {text}) for node, text in src.strings())]
    for node, names in named:
        for private in sorted({p for n in names if (p := _names_private(n))}):
            if not src.inside(PRIVATE_MODULES[private]):
                bad.add(f"{src.where(node)}: imports {private}")
    return sorted(bad)


# The import machinery: where a module's file is looked for, and what a package's namespace holds.
IMPORT_MACHINERY: Final = frozenset({
    "__path__", "meta_path", "path_hooks", "path_importer_cache", "__loader__", "__spec__",
})


def dynamic_imports(src: Source) -> list[str]:
    """An import by a computed name must fold to constants (or a table of them); the machinery is left alone.

    `sys.modules`, `sys.path`, a package's `__path__` and the finders decide which file an
    import runs: a module put under `orchestrator.seam` from elsewhere is a seam module the
    scanner never reads.
    """
    bad = []
    for call, names in src.calls():
        if names & DYNAMIC_IMPORTS and (not call.args or src.candidates(call.args[0]) is None):
            bad.append(f"{src.where(call)}: imports a module by a computed name")
    for node in src.nodes:
        if isinstance(node, ast.Name | ast.Attribute | ast.Call):
            for name in sorted(src.qualnames(node) & {"sys.modules", "sys.path"}):
                bad.append(f"{src.where(node)}: reads {name}")
    bad += [f"{src.where(node)}: reaches the import machinery ({name})" for node, name in src.mentions(IMPORT_MACHINERY)]
    return bad


def token_outside_the_seam(src: Source) -> list[str]:
    """Outside the seam, nothing names the seal token or its ledger, however it is reached."""
    return sorted({f"{src.where(node)}: names the seal's {name}" for node, name in src.mentions(SEAL_NAMES)})


def token_inside_the_seam(src: Source) -> list[str]:
    """Inside the seam, `SEAL` is only compared or handed to a sealed constructor as `seal=` (never stored)."""
    if src.rel == f"{SEAM}_seal.py":
        return []
    bad = []
    for node in src.nodes:
        if not (isinstance(node, ast.Name) and node.id == "SEAL"):
            continue
        parent = src.parents.get(node)
        if isinstance(parent, ast.Compare) and all(isinstance(op, ast.Is | ast.IsNot) for op in parent.ops):
            continue
        call = src.parents.get(parent) if isinstance(parent, ast.keyword) else None
        if isinstance(parent, ast.keyword) and parent.arg == "seal" and isinstance(call, ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id in SEALED:
                continue
        bad.append(f"{src.where(node)}: hands the seal token on ({type(parent).__name__})")
    return bad


def seal_keyword(src: Source) -> list[str]:
    """Nothing outside the seam passes `seal=` (a keyword or a `**` mapping holding it)."""
    bad = []
    for node, _ in src.calls():
        for k in node.keywords:
            if k.arg == "seal" or (
                k.arg is None and isinstance(k.value, ast.Dict) and any(src.fold(key) == "seal" for key in k.value.keys)
            ):
                bad.append(f"{src.where(node)}: passes seal= to {ast.unparse(node.func)}()")
    return bad


def introspection(src: Source) -> list[str]:
    """No function globals, closures, frames' variables, the garbage collector's object lists or raw memory."""
    return sorted({f"{src.where(node)}: reaches {name}" for node, name in src.mentions(INTROSPECTION)})


def dynamic_code(src: Source) -> list[str]:
    """No `exec`, `eval`, `compile` or `breakpoint`, nor the modules that run code from strings or bytes."""
    bad = set()
    for node, name in src.mentions(DYNAMIC_CODE):
        is_builtin = isinstance(node, ast.Name) and name not in src.aliases and name not in src._bound
        via_builtins = isinstance(node, ast.Attribute) and src.qualnames(node.value) & {"builtins"}
        if is_builtin or via_builtins or isinstance(node, ast.Constant | ast.Call | ast.BinOp | ast.JoinedStr):
            bad.add(f"{src.where(node)}: runs code from a string ({name})")
    for node, imported in src.imports():
        for module in sorted({n.split(".")[0] for n in imported} & CODE_MODULES):
            bad.add(f"{src.where(node)}: imports {module}")
    return sorted(bad)


def setattr_bypass(src: Source) -> list[str]:
    """No `__setattr__`/`__delattr__` of object, type or super, aliased or looked up.

    Allowed: `object.__setattr__(self, ...)` in a class's own `__init__` or `__post_init__`,
    on its first parameter, never rebound there (a frozen value filling in its own field).
    Calling those methods on another object is refused by `constructs_sealed`.
    """
    allowed: set[ast.AST] = set()
    for node in src.nodes:
        if (
            isinstance(node, ast.FunctionDef) and node.name in {"__init__", "__post_init__"} and node.args.args
            and isinstance(src.parents.get(node), ast.ClassDef)
        ):
            own = node.args.args[0].arg
            if any(isinstance(n, ast.Name) and n.id == own and not isinstance(n.ctx, ast.Load) for n in ast.walk(node)):
                continue
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and src.qualnames(call.func) == {"object.__setattr__"}
                    and call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == own
                ):
                    allowed.add(call.func)
    return sorted({
        f"{src.where(node)}: reaches {name} (an object's own __setattr__ is bypassed)"
        for node, name in src.mentions(SETATTR_DUNDERS) if node not in allowed
    })


def slot_descriptors(src: Source) -> list[str]:
    """No slot descriptor is written through (`Type.field.__set__(obj, v)`, `getattr_static`)."""
    return sorted({f"{src.where(node)}: writes through a descriptor ({name})" for node, name in src.mentions(DESCRIPTOR_DUNDERS)})


def instance_dicts(src: Source) -> list[str]:
    """No `__dict__`, no `vars(x)`: an object's attributes are reached by their names or not at all."""
    bad = {f"{src.where(node)}: reaches __dict__" for node, _ in src.mentions(frozenset({"__dict__"}))}
    bad |= {f"{src.where(node)}: calls vars()" for node, names in src.calls() if "vars" in names and node.args}
    return sorted(bad)


def class_swaps(src: Source) -> list[str]:
    """No `__class__`, `__bases__` or `__mro__`: an object keeps the class its constructor gave it."""
    names = frozenset({"__class__", "__bases__", "__mro__"})
    return sorted({
        f"{src.where(node)}: reaches {name}" for node, name in src.mentions(names) if not _names_the_class(src, node)
    })


def _names_the_class(src: Source, node: ast.AST) -> bool:
    """`x.__class__.__name__` (or `__qualname__`, `__module__`): the class's name in a message, nothing more."""
    parent = src.parents.get(node)
    return (
        isinstance(node, ast.Attribute) and node.attr == "__class__" and isinstance(node.ctx, ast.Load)
        and isinstance(parent, ast.Attribute) and parent.attr in {"__name__", "__qualname__", "__module__"}
        and not isinstance(src.parents.get(parent), ast.Call)
    )


def constructs_sealed(src: Source) -> list[str]:
    """No sealed object is built outside the seam: by name, an alias, its type, `__new__` or `__init__`."""
    bad = set()
    for node, names in src.calls():
        sealed = {n.rsplit(".", 1)[-1] for n in names} & SEALED
        if sealed:
            bad.add(f"{src.where(node)}: constructs {sorted(sealed)[0]}")
        if isinstance(node.func, ast.Call) and src.qualnames(node.func.func) & {"type"}:
            bad.add(f"{src.where(node)}: constructs through type(...)")
    for found, name in src.mentions(frozenset({"__init__", "__post_init__"})):
        parent = src.parents.get(found)
        if not (name == "__init__" and _initialises_itself(src, found, parent)):
            bad.add(f"{src.where(found)}: calls {name} on an existing object")
    for found, name in src.mentions(frozenset({"__new__", "__init_subclass__"})):
        bad.add(f"{src.where(found)}: reaches {name}")
    for found in src.nodes:
        if isinstance(found, ast.Name) and isinstance(found.ctx, ast.Load) and found.id in SEALED:
            parent = src.parents.get(found)
            if isinstance(parent, ast.Assign | ast.NamedExpr | ast.keyword) or (
                isinstance(parent, ast.Call) and found in parent.args and not _type_check(src, parent)
            ):
                bad.add(f"{src.where(found)}: hands on the class {found.id}")
    return sorted(bad)


def _initialises_itself(src: Source, found: ast.AST, call: ast.AST | None) -> bool:
    """`super().__init__(...)`, or `Base.__init__(self, ...)` / `super(C, self).__init__(...)` in a method on its own `self`."""
    if not (isinstance(found, ast.Attribute) and isinstance(call, ast.Call) and call.func is found):
        return False
    holder = found.value
    if isinstance(holder, ast.Call) and src.qualnames(holder.func) == {"super"} and not holder.args:
        return True
    own = _own_parameter(src, found)
    if own is None:
        return False
    if isinstance(holder, ast.Call) and src.qualnames(holder.func) == {"super"}:
        return len(holder.args) == 2 and isinstance(holder.args[1], ast.Name) and holder.args[1].id == own
    return bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id == own


def _own_parameter(src: Source, node: ast.AST) -> str | None:
    """The first parameter of the method `node` is in, when that method belongs to a class and never rebinds it."""
    function = src.parents.get(node)
    while function is not None and not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        function = src.parents.get(function)
    if function is None or not function.args.args or not isinstance(src.parents.get(function), ast.ClassDef):
        return None
    own = function.args.args[0].arg
    rebound = any(isinstance(n, ast.Name) and n.id == own and not isinstance(n.ctx, ast.Load) for n in ast.walk(function))
    return None if rebound else own


def _type_check(src: Source, call: ast.Call) -> bool:
    return bool(src.qualnames(call.func) & {"isinstance", "issubclass", "cast", "typing.cast"})


def copies(src: Source) -> list[str]:
    """No `copyreg`, no copy or pickle hook called directly: what goes around a sealed value's own refusal.

    `copy` and `pickle` themselves are refused by the sealed values at run time.
    """
    bad = set()
    for node, imported in src.imports():
        for module in sorted({n.split(".")[0] for n in imported} & COPY_MODULES):
            bad.add(f"{src.where(node)}: imports {module}")
    for node, name in src.mentions(COPY_DUNDERS):
        bad.add(f"{src.where(node)}: reaches {name}")
    return sorted(bad)


def subclasses_sealed(src: Source) -> list[str]:
    """No class derives from a sealed class: by a class statement, `type(name, bases, ns)` or `types.new_class`."""
    bad = []
    for node in src.nodes:
        bases: list[ast.expr] = []
        if isinstance(node, ast.ClassDef):
            bases = node.bases
        elif isinstance(node, ast.Call) and src.qualnames(node.func) & {"type", "types.new_class"} and len(node.args) >= 2:
            bases = [e for e in ast.walk(node.args[1]) if isinstance(e, ast.expr)]
        for base in bases:
            if {q.rsplit(".", 1)[-1] for q in src.qualnames(base)} & SEALED:
                bad.append(f"{src.where(node)}: subclasses {ast.unparse(base)}")
    return bad


def patches(src: Source) -> list[str]:
    """Nobody rebinds a name in another of our modules or classes (the engine's check, the token, a method)."""
    bad = []
    for node in src.nodes:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        elif isinstance(node, ast.Call) and src.qualnames(node.func) & {"setattr", "delattr"} and node.args:
            targets = [node]
        stored = [t for top in targets for t in ast.walk(top) if t is top or _stored(t)]
        for target in stored:
            holder = target.args[0] if isinstance(target, ast.Call) else target
            if isinstance(target, ast.Attribute | ast.Subscript):
                holder = target.value
            through_type = isinstance(holder, ast.Call) and src.qualnames(holder.func) & {"type"}
            if holder is not target and (through_type or any(_ours(q) for q in src.qualnames(holder))):
                bad.append(f"{src.where(node)}: rebinds {ast.unparse(target)} in one of our modules or classes")
    modules = _our_module_names(src)
    for node in src.nodes:
        if isinstance(node, ast.Name) and node.id in modules and isinstance(node.ctx, ast.Load):
            parent = src.parents.get(node)
            looked_up = isinstance(parent, ast.Attribute) or (
                isinstance(parent, ast.Call) and parent.args[:1] == [node] and src.qualnames(parent.func) & LOOKUPS
            )
            if not looked_up:
                bad.append(f"{src.where(node)}: hands the module {node.id} on (only its attributes are used)")
    return bad


def _our_module_names(src: Source) -> set[str]:
    """Local names bound to one of our modules (`import orchestrator.x as m`, `from orchestrator import m`)."""
    names = set()
    for local, targets in src.aliases.items():
        for target in targets:
            if _ours(target) and (
                (ROOT / target.replace(".", "/")).with_suffix(".py").is_file()
                or (ROOT / target.replace(".", "/") / "__init__.py").is_file()
            ):
                names.add(local)
    return names


def _stored(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del)


def computed_lookups(src: Source) -> list[str]:
    """A lookup by a computed name on a config or on one of our modules is refused (it could be anything)."""
    bad = []
    for node, names in src.calls():
        if {n.rsplit(".", 1)[-1] for n in names} & LOOKUPS and len(node.args) >= 2 and src.fold(node.args[1]) is None:
            holder = node.args[0]
            if _guarded_by_constants(src, node, node.args[1]):
                continue
            if is_config(holder) or any(_ours(q) for q in src.qualnames(holder)):
                bad.append(f"{src.where(node)}: looks up a computed name on {ast.unparse(holder)}")
    return bad


def _guarded_by_constants(src: Source, node: ast.AST, name: ast.expr) -> bool:
    """Inside `if name in ("a", "b"):` (or `in __all__`), a computed name is one of those constants."""
    if not isinstance(name, ast.Name):
        return False
    child, ancestor = node, src.parents.get(node)
    while ancestor is not None:
        test = ancestor.test if isinstance(ancestor, ast.If) and child in ancestor.body else None
        child, ancestor = ancestor, src.parents.get(ancestor)
        if (
            isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name.id
            and [type(op) for op in test.ops] == [ast.In]
        ):
            table = test.comparators[0]
            tables = src._bound.get(table.id, []) if isinstance(table, ast.Name) else [table]
            return bool(tables) and all(
                isinstance(t, ast.Tuple | ast.List | ast.Set) and all(src.fold(e) is not None for e in t.elts)
                for t in tables
            )
    return False


def is_config(node: ast.AST) -> bool:
    """`config`, `cfg`, `self.config`, `runtime.config`: what holds the agents' raw config."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "config" in name.lower() or name.lower() in {"cfg", "conf"}


def unreadable(rel: str, data: bytes) -> list[str]:
    """A module is UTF-8 (no other coding cookie) and parses: what the scanner reads is what runs."""
    for line in data.splitlines()[:2]:
        match = _CODING.match(line)
        if match and match.group(1).decode("ascii", "replace").lower().replace("_", "-") not in {"utf-8", "utf8"}:
            return [f"{rel}:1: declares coding {match.group(1).decode('ascii', 'replace')}"]
    return []


IMPORTABLE: Final = (".pyc", ".pyo", ".so", ".pyd", ".pth", ".zip", ".egg", ".whl")



def foreign_module(rel: str) -> list[str]:
    """A file the interpreter could import but the scanner cannot read (bytecode beside the source, an extension)."""
    if "__pycache__/" in rel or not rel.endswith(IMPORTABLE):
        return []
    return [f"{rel}: a module the scanner cannot read"]
