"""Every script in bench/ runs in its `--quick` mode and prints its figures: a bench that breaks fails here.

The rule (docs/operations.md, Benchmarks): a script in bench/ takes `--quick` (tiny sizes, a few
rounds, seconds not minutes) and is listed in FIGURES below with a line its `--quick` output
prints. A module the scripts import, or a child one of them runs, says `__bench__ = False` at
module level and is not run here. The figures themselves are never asserted (house rule 17):
only that the bench ran to its end.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]
BENCH: Final = ROOT / "bench"
RULE: Final = (
    "every script in bench/ takes --quick (tiny sizes, seconds not minutes) and is listed in FIGURES "
    "in tests/test_benches.py with a line its --quick output prints; a module the scripts only import "
    "(or a child one of them runs) says `__bench__ = False` at module level (docs/operations.md, Benchmarks)"
)
# a line each bench prints at (or near) its end, so a run that stops early is caught too
FIGURES: Final = MappingProxyType({
    "acp_start": "ratio to floor:",
    "admission_gates": "PairingStore.offer, code already held:",
    "anthropic_overhead": "over the session:",
    "approval_text": "100k file",
    "budget_overshoot": "turns past the budget",
    "channel_throughput": "replies matched to their message in every phase: yes",
    "daemon_start": "SIGTERM at READY -> exit 0:",
    "group_gate": "gate decisions measured:",
    "gateway_uploads": "multipart   2 at once:",
    "inbox_intake": "write + sync, 4 at once",
    "long_session": "last bucket / second bucket:",
    "mcp_overhead": "server kit2: 1 process(es) spawned",
    "media": "held at peak:",
    "media_downloads": "discord  download",
    "metrics_overhead": "turns counted by the metrics run:",
    "pdf_child": "starting a spare (none) holds the loop",
    "redaction": "added to a logged INFO line:",
    "sandbox_overhead": "median of all none runs:",
    "seal": "source scanner:",
    "soak": "RSS slope of the last half",
    "status": "orchestrator status CLI:",
    "streaming": "daemon CPU per turn",
    "streaming_platforms": "discord (send + edit)",
    "turn_overhead": "whole bench:",
    "usage_record": "turn-end flush",
    "workspace_io": "open the root",
})
# the benches measure CPU and spawn daemons of their own: two at once on the 2-CPU runner
WORKERS: Final = 2
RUN_TIMEOUT_S: Final = 180.0
# the ones that spend most of their time waiting on purpose (paced models, pacers) start first
SLOW_FIRST: Final = ("streaming", "daemon_start", "turn_overhead", "channel_throughput", "acp_start")

# the module's first test waits for every selected bench (they run two at a time)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def is_bench(path: Path) -> bool:
    """Return False for a module that says `__bench__ = False` at module level, else True."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(isinstance(t, ast.Name) and t.id == "__bench__" for t in targets)
            if named and isinstance(node.value, ast.Constant) and node.value.value is False:
                return False
    return True


def benches() -> list[str]:
    return sorted(path.stem for path in BENCH.glob("*.py") if is_bench(path))


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    code: int | None  # None: killed after RUN_TIMEOUT_S
    stdout: str
    stderr: str
    seconds: float

    def describe(self, name: str) -> str:
        how = "timed out" if self.code is None else f"exited {self.code}"
        return (
            f"bench/{name}.py --quick {how} after {self.seconds:.1f} s\n"
            f"--- stdout (tail)\n{self.stdout[-3000:]}\n--- stderr (tail)\n{self.stderr[-3000:]}"
        )


def run_quick(name: str) -> Run:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), "--quick"], cwd=ROOT, env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = (s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (exc.stdout, exc.stderr))
        return Run(code=None, stdout=out, stderr=err, seconds=time.perf_counter() - started)
    return Run(code=done.returncode, stdout=done.stdout, stderr=done.stderr, seconds=time.perf_counter() - started)


@pytest.fixture(scope="module")
def quick_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Run]]:
    """Run `--quick` of every bench this session selected, WORKERS at a time."""
    selected = {
        str(item.callspec.params["name"])
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_bench_runs_quick_and_prints_its_figures"
    }
    order = sorted(selected, key=lambda name: (SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST), name))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        yield dict(zip(order, pool.map(run_quick, order), strict=True))


def test_every_bench_takes_quick_and_names_a_line_it_prints() -> None:
    missing = [name for name in benches() if '"--quick"' not in (BENCH / f"{name}.py").read_text(encoding="utf-8")]
    unlisted = [name for name in benches() if name not in FIGURES]
    stale = sorted(set(FIGURES) - set(benches()))
    assert (missing, unlisted, stale) == ([], [], []), (
        f"without --quick: {missing}; not in FIGURES: {unlisted}; in FIGURES but no bench: {stale}. {RULE}"
    )


def test_the_helper_modules_are_marked_and_the_benches_are_not() -> None:
    helpers = sorted(path.stem for path in BENCH.glob("*.py") if not is_bench(path))
    assert {"channel_platforms", "fake_provider", "sdk_floor"} <= set(helpers)
    assert "turn_overhead" in benches()


@pytest.mark.parametrize("name", benches())
def test_bench_runs_quick_and_prints_its_figures(name: str, quick_runs: dict[str, Run]) -> None:
    run = quick_runs[name]
    assert run.code == 0, f"{run.describe(name)}\n{RULE}"
    expected = FIGURES.get(name)
    assert expected is not None, f"bench/{name}.py is not in FIGURES. {RULE}"
    assert expected in run.stdout, f"bench/{name}.py --quick did not print {expected!r}\n{run.describe(name)}"
