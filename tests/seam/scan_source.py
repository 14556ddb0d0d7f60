"""One module as the seal scanner reads it (`Source`): its tree, what its names stand for, its strings.

`Source` sees a module as Python runs it: it parses the bytes (so a coding cookie decodes
as it would on import), follows import aliases and simple assignments to the dotted names
they stand for (`qualnames`), and folds strings built from constants (`"ag" + "ents"`,
f-strings, `"".join`, `str` methods, `%`, slices, `chr`), NFKC-normalised as identifiers
are, so a name spelled another way is still seen.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
_DOTTED: Final = re.compile(r"[\w]+(?:[.:][\w]+)+")
OUR_PACKAGES: Final = ("orchestrator", "channels")
DYNAMIC_IMPORTS: Final = frozenset({
    "importlib.import_module", "__import__", "importlib.__import__", "builtins.__import__", "importlib.reload", "importlib.util.find_spec",
    "importlib.util.spec_from_file_location", "importlib.machinery.SourceFileLoader", "runpy.run_module",
    "runpy.run_path", "pkgutil.resolve_name", "zipimport.zipimporter", "pydoc.locate",
})
_STR_METHODS: Final = frozenset({
    "lower", "upper", "casefold", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix",
    "title", "swapcase", "capitalize", "format", "join", "decode",
})


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
    _imports: list[tuple[ast.AST, set[str]]] | None = None
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

    def imports(self) -> list[tuple[ast.AST, set[str]]]:
        """Every import statement and dynamic import, with the modules it names."""
        if self._imports is None:
            self._imports = [(n, names) for n in self.nodes if (names := self.imported(n))]
        return self._imports

    def strings(self) -> Iterator[tuple[ast.AST, str]]:
        """Every identifier and constant-built string, with the node that says it."""
        for node, said in self._said_list():
            for text in said:
                yield node, text

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
            func = self.qualnames(node.func, d)
            if func & {"getattr", "inspect.getattr_static", "object.__getattribute__"} and len(node.args) >= 2:
                name = self.fold(node.args[1])
                return {f"{q}.{name}" for q in self.qualnames(node.args[0], d)} if name else set()
            if isinstance(node.func, ast.Attribute) and node.func.attr == "__getattribute__" and node.args:
                name = self.fold(node.args[0])
                return {f"{q}.{name}" for q in self.qualnames(node.func.value, d)} if name else set()
            if self.qualnames(node.func, d) & DYNAMIC_IMPORTS and node.args:
                return self.candidates(node.args[0]) or set()
        if isinstance(node, ast.Subscript) and self.qualnames(node.value, d) & {"sys.modules"}:
            key = self.fold(node.slice)
            return {key} if key else set()
        return set()

    def mentions(self, names: frozenset[str]) -> Iterator[tuple[ast.AST, str]]:
        """Each identifier, attribute, imported name or constant-built string that is one of `names`."""
        for node, said in self._said_list():
            for name in sorted(said & names):
                yield node, name

    def _said_list(self) -> list[tuple[ast.AST, frozenset[str]]]:
        if self._said is None:
            self._said = [(node, said) for node in self.nodes if (said := self._says(node))]
        return self._said

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
                    if _DOTTED.fullmatch(folded):  # "pkg.module:NAME", "a.b.c": each part is a name too
                        said |= set(re.split(r"[.:]", folded))
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
