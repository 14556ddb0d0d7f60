"""The seal scanner: one rule per way around the seam, each over one parsed module (`Source`).

A rule returns one line per finding, `path:line: what`. `Source` sees a module as Python
runs it: it parses the bytes (so a coding cookie decodes as it would on import), follows
import aliases and simple assignments to the dotted names they stand for (`qualnames`),
and folds strings built from constants (`"ag" + "ents"`, f-strings, `"".join`, `str`
methods, slices, `chr`), NFKC-normalised as identifiers are, so a key spelled another way
is still seen. What cannot be folded is refused where a computed name could reach policy
(a dynamic import, a lookup on a config or on one of our modules).
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
SEAM: Final = "orchestrator/seam/"
SEALED: Final = frozenset({"ScopedToolRegistry", "ResolvedAgentExecution", "ApprovalManager"})
# What orchestrator/seam/_seal.py holds: the token, the mint ledger and the class guard.
SEAL_NAMES: Final = frozenset({"SEAL", "_seal", "_MINTED", "vouch", "vouched", "sealed_class"})
# Private modules and the only package that may import them.
PRIVATE_MODULES: Final = {"orchestrator.seam._seal": SEAM, "orchestrator.config.models": "orchestrator/config/"}
OUR_PACKAGES: Final = ("orchestrator", "channels")
DYNAMIC_IMPORTS: Final = frozenset({
    "importlib.import_module", "__import__", "importlib.__import__", "importlib.reload", "importlib.util.find_spec",
    "importlib.util.spec_from_file_location", "importlib.machinery.SourceFileLoader", "runpy.run_module",
    "runpy.run_path", "pkgutil.resolve_name", "zipimport.zipimporter",
})
# Attribute lookups by name; the name is the second argument (the first for the *getter factories).
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
    "from_address", "memmove",
})
DYNAMIC_CODE: Final = frozenset({"exec", "eval", "compile", "breakpoint"})
CODE_MODULES: Final = frozenset({"runpy", "code", "codeop", "marshal"})
COPY_MODULES: Final = frozenset({"copy", "pickle", "copyreg", "shelve", "dill", "cloudpickle", "_pickle"})
COPY_DUNDERS: Final = frozenset({
    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__copy__", "__deepcopy__", "__replace__",
})
SETATTR_DUNDERS: Final = frozenset({"__setattr__", "__delattr__"})
DESCRIPTOR_DUNDERS: Final = frozenset({"__set__", "__delete__", "getattr_static"})
_STR_METHODS: Final = frozenset({
    "lower", "upper", "casefold", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix",
    "title", "swapcase", "capitalize", "format", "join", "decode",
})
_CODING: Final = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


@dataclass
class Source:
    """One module as the rules see it: its tree, aliases, parents and folded strings."""

    rel: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    nodes: list[ast.AST] = field(default_factory=list)
    _bound: dict[str, list[ast.expr]] = field(default_factory=dict)
    _said: list[tuple[ast.AST, frozenset[str]]] | None = None
    _calls: list[tuple[ast.Call, set[str]]] | None = None
    _qualnames: dict[int, set[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, rel: str, text: str | bytes) -> Source:
        """Parse `text` (bytes: decoded by its coding cookie, as the interpreter would)."""
        source = cls(rel=rel, tree=ast.parse(text, filename=rel))
        source.nodes = list(ast.walk(source.tree))
        source.parents = {c: n for n in source.nodes for c in ast.iter_child_nodes(n)}
        for node in source.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    source.aliases.setdefault(local, set()).add(a.name if a.asname else local)
            elif isinstance(node, ast.ImportFrom):
                base = source.absolute(node)
                for a in node.names:
                    source.aliases.setdefault(a.asname or a.name, set()).add(f"{base}.{a.name}")
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        source._bound.setdefault(target.id, []).append(node.value)
        return source

    def inside(self, folder: str) -> bool:
        """Whether this module's file lies under `folder` (the path as written: no look-alike is the seam)."""
        return self.rel.startswith(folder)

    def where(self, node: ast.AST) -> str:
        return f"{self.rel}:{getattr(node, 'lineno', 0)}"

    def package(self) -> str:
        parts = self.rel.removesuffix(".py").split("/")
        return ".".join(parts[:-1])

    def absolute(self, node: ast.ImportFrom) -> str:
        """The module an `ImportFrom` names, a relative one resolved against this file."""
        if not node.level:
            return node.module or ""
        parts = self.package().split(".")
        base = parts[: len(parts) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def imported(self, node: ast.AST) -> set[str]:
        """The dotted modules (and `module.name`s) one import statement or dynamic import names."""
        if isinstance(node, ast.Import):
            return {a.name for a in node.names}
        if isinstance(node, ast.ImportFrom):
            base = self.absolute(node)
            return {base, *(f"{base}.{a.name}" for a in node.names)}
        if isinstance(node, ast.Call) and self.qualnames(node.func) & DYNAMIC_IMPORTS and node.args:
            return self.candidates(node.args[0]) or set()
        return set()

    def fold(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """The string `node` always evaluates to, when constants alone build it (NFKC-normalised)."""
        if node is None or depth > 12:
            return None
        d = depth + 1
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return nfkc(node.value)
            if isinstance(node.value, bytes):
                return nfkc(node.value.decode("latin-1"))
            if isinstance(node.value, int) and not isinstance(node.value, bool):
                return str(node.value)
            return None
        if isinstance(node, ast.JoinedStr):
            parts = [self.fold(v.value if isinstance(v, ast.FormattedValue) else v, d) for v in node.values]
            return None if None in parts else "".join(p for p in parts if p is not None)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
            left, right = self.fold(node.left, d), self.fold(node.right, d)
            if left is None or right is None:
                return None
            return left + right if isinstance(node.op, ast.Add) else _percent(left, node.right, self, d)
        if isinstance(node, ast.Name):
            values = {self.fold(v, d) for v in self._bound.get(node.id, [])}
            return values.pop() if len(values) == 1 else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            text = self.fold(node.value, d)
            bounds = [self._int(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)]
            return text[slice(*bounds)] if text is not None else None
        if isinstance(node, ast.Call):
            return self._fold_call(node, d)
        return None

    def _int(self, node: ast.expr | None) -> int | None:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._int(node.operand)
            return -inner if inner is not None else None
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) else None

    def _fold_call(self, node: ast.Call, depth: int) -> str | None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"str", "chr"} and len(node.args) == 1:
            arg = node.args[0]
            if func.id == "chr":
                code = self._int(arg)
                return chr(code) if code is not None else None
            return self.fold(arg, depth)
        if not (isinstance(func, ast.Attribute) and func.attr in _STR_METHODS):
            return None
        if func.attr == "join" and len(node.args) == 1 and isinstance(node.args[0], ast.List | ast.Tuple):
            sep, items = self.fold(func.value, depth), [self.fold(e, depth) for e in node.args[0].elts]
            return None if sep is None or None in items else sep.join(i for i in items if i is not None)
        text = self.fold(func.value, depth)
        args = [self.fold(a, depth) for a in node.args]
        if text is None or None in args or node.keywords:
            return None
        if func.attr == "decode":
            return text
        try:
            result = getattr(text, func.attr)(*args)
        except (TypeError, ValueError, IndexError, KeyError):
            return None
        return nfkc(result) if isinstance(result, str) else None

    def candidates(self, node: ast.expr) -> set[str] | None:
        """Every string `node` may be: one folded string, or the values of a constant table it indexes."""
        folded = self.fold(node)
        if folded is not None:
            return {folded}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            tables = [d for v in self._bound.get(node.value.id, []) for d in ast.walk(v) if isinstance(d, ast.Dict)]
            values = {self.fold(v) for t in tables for v in t.values}
            if tables and None not in values:
                return {v for v in values if v is not None}
        return None

    def qualnames(self, node: ast.AST, depth: int = 0) -> set[str]:
        """The dotted names `node` may stand for, through imports, assignments and `getattr` by a constant."""
        if depth > 8:
            return set()
        if depth == 0:
            cached = self._qualnames.get(id(node))
            if cached is None:
                cached = self._qualnames[id(node)] = self._qualnames_of(node, 0)
            return cached
        return self._qualnames_of(node, depth)

    def _qualnames_of(self, node: ast.AST, depth: int) -> set[str]:
        d = depth + 1
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return set(self.aliases[node.id])
            bound = {q for v in self._bound.get(node.id, []) for q in self.qualnames(v, d)}
            return bound or {node.id}
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.qualnames(node.value, d)}
        if isinstance(node, ast.Call):
            if self.qualnames(node.func, d) & {"getattr"} and len(node.args) >= 2:
                name = self.fold(node.args[1])
                return {f"{q}.{name}" for q in self.qualnames(node.args[0], d)} if name else set()
            if self.qualnames(node.func, d) & DYNAMIC_IMPORTS and node.args:
                return self.candidates(node.args[0]) or set()
        if isinstance(node, ast.Subscript) and self.qualnames(node.value, d) & {"sys.modules"}:
            key = self.fold(node.slice)
            return {key} if key else set()
        return set()

    def mentions(self, names: frozenset[str]) -> Iterator[tuple[ast.AST, str]]:
        """Each identifier, attribute, imported name or constant-built string that is one of `names`."""
        if self._said is None:
            self._said = [(node, said) for node in self.nodes if (said := self._says(node))]
        for node, said in self._said:
            for name in sorted(said & names):
                yield node, name

    def _says(self, node: ast.AST) -> frozenset[str]:
        said: set[str] = set()
        if isinstance(node, ast.Name):
            said.add(node.id)
        elif isinstance(node, ast.Attribute):
            said.add(node.attr)
        elif isinstance(node, ast.alias):
            said |= {*node.name.split("."), *([node.asname] if node.asname else [])}
        elif isinstance(node, ast.keyword) and node.arg:
            said.add(node.arg)
        elif isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp | ast.Call | ast.Subscript):
            if not isinstance(self.parents.get(node), ast.BinOp | ast.JoinedStr | ast.FormattedValue):
                folded = self.fold(node)
                if folded is not None and not (isinstance(node, ast.Call) and folded == ""):
                    said.add(folded)
        return frozenset(said)

    def calls(self) -> list[tuple[ast.Call, set[str]]]:
        """Every call with the dotted names its function may stand for."""
        if self._calls is None:
            self._calls = [(n, self.qualnames(n.func)) for n in self.nodes if isinstance(n, ast.Call)]
        return self._calls


def _percent(left: str, right: ast.expr, source: Source, depth: int) -> str | None:
    items = right.elts if isinstance(right, ast.Tuple) else [right]
    values = [source.fold(i, depth) for i in items]
    if None in values:
        return None
    try:
        return left % tuple(values)
    except (TypeError, ValueError):
        return None


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
    bad = []
    for node in src.nodes:
        names = src.imported(node)
        if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp | ast.Call) and not names:
            if not isinstance(src.parents.get(node), ast.BinOp | ast.JoinedStr | ast.FormattedValue):
                folded = src.fold(node)
                names = {folded} if folded else set()
        for private in sorted({p for n in names if (p := _names_private(n))}):
            if not src.inside(PRIVATE_MODULES[private]):
                bad.append(f"{src.where(node)}: imports {private}")
    return sorted(set(bad))


def dynamic_imports(src: Source) -> list[str]:
    """An import by a computed name must fold to constants (or a table of them); `sys.modules` is not read."""
    bad = []
    for node, names in src.calls():
        if names & DYNAMIC_IMPORTS and (not node.args or src.candidates(node.args[0]) is None):
            bad.append(f"{src.where(node)}: imports a module by a computed name")
    for node in src.nodes:
        if isinstance(node, ast.Name | ast.Attribute | ast.Call) and src.qualnames(node) & {"sys.modules"}:
            bad.append(f"{src.where(node)}: reads sys.modules")
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
    for node in src.nodes:
        for module in sorted({n.split(".")[0] for n in src.imported(node)} & CODE_MODULES):
            bad.add(f"{src.where(node)}: imports {module}")
    return sorted(bad)


def setattr_bypass(src: Source) -> list[str]:
    """No `__setattr__`/`__delattr__` of object, type or super on another object, aliased or looked up."""
    allowed: set[ast.AST] = set()
    for node in src.nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.args.args:
            own = node.args.args[0].arg
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
    return sorted({f"{src.where(node)}: reaches {name}" for node, name in src.mentions(names)})


def constructs_sealed(src: Source) -> list[str]:
    """No sealed object is built outside the seam: by name, an alias, its type, `__new__` or `__init__`."""
    bad = set()
    for node, names in src.calls():
        sealed = {n.rsplit(".", 1)[-1] for n in names} & SEALED
        if sealed:
            bad.add(f"{src.where(node)}: constructs {sorted(sealed)[0]}")
        if isinstance(node.func, ast.Call) and src.qualnames(node.func.func) & {"type"}:
            bad.add(f"{src.where(node)}: constructs through type(...)")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "__init__":
            if not (isinstance(node.func.value, ast.Call) and src.qualnames(node.func.value.func) == {"super"}):
                bad.add(f"{src.where(node)}: calls __init__ on an existing object")
    for node, name in src.mentions(frozenset({"__new__", "__init_subclass__"})):
        bad.add(f"{src.where(node)}: reaches {name}")
    for node in src.nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in SEALED:
            parent = src.parents.get(node)
            if isinstance(parent, ast.Assign | ast.NamedExpr | ast.keyword) or (
                isinstance(parent, ast.Call) and node in parent.args and not _type_check(src, parent)
            ):
                bad.add(f"{src.where(node)}: hands on the class {node.id}")
    return sorted(bad)


def _type_check(src: Source, call: ast.Call) -> bool:
    return bool(src.qualnames(call.func) & {"isinstance", "issubclass", "cast", "typing.cast"})


def copies(src: Source) -> list[str]:
    """No copy, pickle or copyreg, nor the hooks they call: a sealed value is never cloned."""
    bad = set()
    for node in src.nodes:
        for module in sorted({n.split(".")[0] for n in src.imported(node)} & COPY_MODULES):
            bad.add(f"{src.where(node)}: imports {module}")
    for node, name in src.mentions(COPY_DUNDERS):
        bad.add(f"{src.where(node)}: reaches {name}")
    for node, names in src.calls():
        if names & {"copy.replace", "copy.copy", "copy.deepcopy"}:
            bad.add(f"{src.where(node)}: copies with {sorted(names)[0]}")
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
            if holder is not target and any(_ours(q) for q in src.qualnames(holder)):
                bad.append(f"{src.where(node)}: rebinds {ast.unparse(target)} in one of our modules or classes")
    return bad


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
    if not isinstance(node, ast.Call) or not any(_is_agents_key(src, a) for a in node.args):
        return []
    getters = {q.rsplit(".", 1)[-1] for q in src.qualnames(node.func)} & GETTERS
    if isinstance(node.func, ast.Attribute) and node.func.attr in GETTERS:
        return [f"{where}: reads 'agents' through .{node.func.attr}()"]
    if getters:
        return [f"{where}: reads 'agents' through {sorted(getters)[0]}()"]
    return []


def _is_agents_key(src: Source, node: ast.AST) -> bool:
    key = src.fold(node)
    return key is not None and (key == AGENTS_KEY or key.startswith(f"{AGENTS_KEY}."))


def _config_dumped(src: Source, node: ast.AST, where: str, holds_config: Callable[[ast.AST], bool]) -> list[str]:
    """`config.model_dump()`, `dict(config)`, `vars(config)`, `for k, v in config`: the whole config as data."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CONFIG_DUMPS and holds_config(func.value):
            return [f"{where}: dumps the config ({func.attr})"]
        if src.qualnames(func) & {"dict", "vars", "iter", "list", "tuple"} and node.args and holds_config(node.args[0]):
            return [f"{where}: dumps the config ({ast.unparse(func)}(...))"]
    if isinstance(node, ast.For | ast.comprehension) and holds_config(node.iter):
        return [f"{where}: iterates over the config"]
    return []


def _is_agents(node: ast.AST) -> bool:
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
    for node in src.nodes:
        for name in src.imported(node):
            if any(name == f or name.startswith(f"{f}.") for f in CHANNEL_FORBIDDEN):
                bad.add(f"{src.where(node)}: imports {name}")
    return sorted(bad)


def foreign_module(rel: str) -> list[str]:
    """A file the interpreter could import but the scanner cannot read (bytecode beside the source, an extension)."""
    if "__pycache__/" in rel or not rel.endswith(IMPORTABLE):
        return []
    return [f"{rel}: a module the scanner cannot read"]
