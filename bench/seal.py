"""Measure what the seal's run-time guard costs a turn, and how long the source scanner takes.

Run from the repository root::

    .venv/bin/python bench/seal.py [--runs N]

Resolves one agent N times through `build_cli_run` (three sealed constructors each record
what they finished in the mint ledger), times one `vouch` on its own, and the engine's
check (`ResolvedAgentExecution.minted`) beside the type check it replaced. Then parses orchestrator/ and channels/ and applies
every seal rule once. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.seam import ResolvedAgentExecution, Services, build_cli_run  # noqa: E402

CONFIG = '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\ntools = ["file_read"]\n'


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    return f"p50 {p50 * 1e6:8.2f} us  p99 {p99 * 1e6:8.2f} us"


async def _resolves(runs: int) -> tuple[list[float], ResolvedAgentExecution]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.toml")
        path.write_text(CONFIG, encoding="utf-8")
        config = load_config(path)
        services = Services()
        try:
            samples, execution = [], build_cli_run(config, "a", services)
            for _ in range(runs):
                services.cache.clear()  # resolve() caches per config generation: time the first one
                start = time.perf_counter()
                execution = build_cli_run(config, "a", services)
                samples.append(time.perf_counter() - start)
            return samples, execution
        finally:
            await services.providers.aclose()


def _checks(execution: ResolvedAgentExecution, runs: int) -> tuple[list[float], list[float]]:
    minted, typed = [], []
    for _ in range(runs):
        start = time.perf_counter()
        ResolvedAgentExecution.minted(execution)
        middle = time.perf_counter()
        _ = type(execution) is ResolvedAgentExecution
        minted.append(middle - start)
        typed.append(time.perf_counter() - middle)
    return minted, typed


def _ledger(runs: int) -> list[float]:
    """What each sealed constructor adds: recording one fresh object (its weak reference and callback)."""
    from orchestrator.seam._seal import vouch

    class Minted:
        __slots__ = ("__weakref__",)

    samples, kept = [], []
    for _ in range(runs):
        fresh = Minted()
        start = time.perf_counter()
        vouch(fresh)
        samples.append(time.perf_counter() - start)
        kept.append(fresh)
    return samples


def _scan(modules: int | None) -> tuple[int, float]:
    """Run every rule over the first `modules` sources (None: all); return the count and seconds."""
    from tests.seam.test_architecture import RULES, sources

    start = time.perf_counter()
    scanned = sources()[:modules]
    for source in scanned:
        for check, binds in RULES.values():
            if binds(source.rel):
                check(source)
    return len(scanned), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--scan-modules", type=int, default=None, help="scan only the first N sources (default: all)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=20, scan_modules=20)
    args = parser.parse_args()
    resolves, execution = asyncio.run(_resolves(args.runs))
    minted, typed = _checks(execution, args.runs * 10)
    print(f"first resolve of a generation (3 vouches) {_percentiles(resolves)}")
    print(f"ledger: vouch() per sealed object         {_percentiles(_ledger(args.runs))}")
    print(f"engine check: minted()                    {_percentiles(minted)}")
    print(f"engine check: type() is (before)          {_percentiles(typed)}")
    count, seconds = _scan(args.scan_modules)
    print(f"source scanner: {count} modules, every rule, {seconds:.2f} s (parsing included)")


if __name__ == "__main__":
    main()
