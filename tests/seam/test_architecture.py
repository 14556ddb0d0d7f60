"""Architecture rules, checked on the source: policy is read and sealed objects built only in the seam.

The rules live in `tests/seam/seal_scan.py` and `policy_scan.py` (over a module as
`scan_source.Source` reads it), one per way around the seam. Each is applied to the real
tree here, and each has planted violations it must catch (`PLANTED`) and allowed code it
must pass (`ALLOWED`), both in `seal_plants.py`. What a source scanner cannot see (a copy,
a pickle, `__new__`, a subclass, an object made around its constructor) the sealed classes
refuse at run time: tests/seam/test_seal_runtime.py.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.seam import policy_scan, seal_scan as scan
from tests.seam.policy_scan import POLICY_OWNERS
from tests.seam.seal_plants import ALLOWED, PLANTED, Plant
from tests.seam.scan_source import OUR_PACKAGES, ROOT, Source
from tests.seam.seal_scan import SEAM, SEALED

__all__ = ["POLICY_OWNERS", "modules"]

EXECUTION_FIELDS = (
    "identity", "model", "provider", "security", "tools", "approvals", "knobs", "context", "assembly", "memory",
    "skills", "mcp_bundles", "prompt_sections", "system_prompt", "ledger", "usage",
)


def modules(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    """Each module under `folders` as (path from the root, its tree)."""
    for source in sources():
        if source.rel.startswith(tuple(f"{f}/" for f in folders)):
            yield source.rel, source.tree


@functools.cache
def sources() -> tuple[Source, ...]:
    """Every module of orchestrator/ and channels/, parsed from its bytes as the interpreter reads it."""
    return tuple(
        Source.parse(path.relative_to(ROOT).as_posix(), path.read_bytes())
        for folder in OUR_PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
    )


def _outside_seam(rel: str) -> bool:
    return not rel.startswith(SEAM)


# Programs that run only as their own interpreter (`python -I -S -c`, the parser child): no
# sealed object exists there, and the child must put pypdf's folder on its own sys.path.
CHILD_PROGRAMS: Final = frozenset({"orchestrator/media/pdf_child.py"})

# rule name -> (the rule, which modules it binds)
RULES: dict[str, tuple[scan.Rule, Callable[[str], bool]]] = {
    "private_modules": (scan.private_modules, lambda rel: True),
    "dynamic_imports": (scan.dynamic_imports, lambda rel: rel not in CHILD_PROGRAMS),
    "introspection": (scan.introspection, lambda rel: True),
    "dynamic_code": (scan.dynamic_code, lambda rel: True),
    "token_outside_the_seam": (scan.token_outside_the_seam, _outside_seam),
    "token_inside_the_seam": (scan.token_inside_the_seam, lambda rel: rel.startswith(SEAM)),
    "seal_keyword": (scan.seal_keyword, _outside_seam),
    "setattr_bypass": (scan.setattr_bypass, _outside_seam),
    "slot_descriptors": (scan.slot_descriptors, _outside_seam),
    "instance_dicts": (scan.instance_dicts, _outside_seam),
    "class_swaps": (scan.class_swaps, _outside_seam),
    "constructs_sealed": (scan.constructs_sealed, _outside_seam),
    "copies": (scan.copies, _outside_seam),
    "subclasses_sealed": (scan.subclasses_sealed, _outside_seam),
    "patches": (scan.patches, _outside_seam),
    "computed_lookups": (scan.computed_lookups, _outside_seam),
    "reaches_resolve": (policy_scan.reaches_resolve, _outside_seam),
    "policy_reads": (policy_scan.policy_reads, lambda rel: not rel.startswith(POLICY_OWNERS)),
    "channel_imports": (policy_scan.channel_imports, lambda rel: rel.startswith("channels/")),
}


def violations(rule: str) -> list[str]:
    check, binds = RULES[rule]
    return [line for source in sources() if binds(source.rel) for line in check(source)]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_tree_keeps_the_seal_rule(rule: str) -> None:
    assert violations(rule) == []


def test_agent_policy_is_read_only_in_the_seam() -> None:
    """Outside seam/ and config/, nobody holds an agent's raw config to re-derive policy."""
    assert violations("policy_reads") == []


def test_production_enters_resolve_only_through_the_path_builders() -> None:
    """Call sites call their path's builder (the matrix uses the same ones), never resolve() inline."""
    assert violations("reaches_resolve") == []


def test_every_module_is_read_as_the_interpreter_reads_it() -> None:
    """UTF-8 sources only, and no module the scanner cannot read (bytecode, extensions, .pth files)."""
    bad = []
    for folder in OUR_PACKAGES:
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix == ".py":
                bad += scan.unreadable(rel, path.read_bytes())
            bad += scan.foreign_module(rel)
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




def _id(plant: Plant) -> str:
    first = plant.source.splitlines()[-1] if isinstance(plant.source, str) else "coding cookie"
    return f"{plant.rule}: {first[:60]!s}"


@pytest.mark.parametrize("plant", PLANTED, ids=_id)
def test_the_rules_catch_planted_violations(plant: Plant) -> None:
    """Each planted bypass is reported by its rule, at its line."""
    check, binds = RULES[plant.rule]
    assert binds(plant.rel), plant.rel
    found = check(Source.parse(plant.rel, plant.source))
    assert any(plant.expected in line and line.startswith(f"{plant.rel}:") for line in found), found




@pytest.mark.parametrize(("rule", "rel", "source"), ALLOWED, ids=[f"{r}: {s.splitlines()[0][:50]}" for r, _, s in ALLOWED])
def test_the_rules_let_allowed_code_pass(rule: str, rel: str, source: str) -> None:
    check, _ = RULES[rule]
    assert check(Source.parse(rel, source)) == []


def test_the_scanner_knows_every_name_the_seal_module_holds() -> None:
    """A name added to orchestrator/seam/_seal.py is refused outside the seam like the token."""
    tree = next(s.tree for s in sources() if s.rel == f"{SEAM}_seal.py")
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)} | {
        t.id for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)
    }
    assert "SEAL" in defined
    assert defined - {"_Class"} <= scan.SEAL_NAMES  # _Class: the module's TypeVar


def test_every_rule_has_planted_violations() -> None:
    assert {p.rule for p in PLANTED} == set(RULES)
    assert len(PLANTED) >= 15


def test_the_source_checks_catch_what_the_interpreter_would_read_otherwise(tmp_path: Path) -> None:
    assert scan.unreadable("x.py", b"# -*- coding: utf-7 -*-\nx = 1\n") == ["x.py:1: declares coding utf-7"]
    assert scan.unreadable("x.py", b"# -*- coding: utf-8 -*-\nx = 1\n") == []
    assert scan.foreign_module("orchestrator/seam/evil.pyc") == ["orchestrator/seam/evil.pyc: a module the scanner cannot read"]
    assert scan.foreign_module("orchestrator/x.pth") != []
    assert scan.foreign_module("orchestrator/seam/__pycache__/x.cpython-311.pyc") == []
