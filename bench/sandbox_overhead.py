"""Measure what the shell sandbox adds to one command: `true` under bwrap, Landlock and none.

Run from the repository root::

    .venv/bin/python bench/sandbox_overhead.py [--runs N] [--files N]

Each run calls the real `shell` tool (`run_command`: allowlist, sandbox launch, supervision,
report, the workspace size check; Landlock with its seccomp filter) on `true`, in a workspace
holding `--files` small files (the size check walks them), the kinds interleaved round-robin after one untimed warm-up each, so load
on the machine hits every kind alike. Prints p50/p95 per kind and what each adds over none
at p50 and p95. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.policy import SandboxKind, SecurityPolicy, ShellSandbox
from orchestrator.tools import run_command
from orchestrator.tools.sandbox import bwrap_error, landlock_error

KINDS: tuple[SandboxKind, ...] = ("none", "landlock", "bwrap")


def _policy(workspace: Path, kind: SandboxKind) -> SecurityPolicy:
    return SecurityPolicy(
        agent="bench", autonomy="full", workspace=workspace, shell_allowed_commands=frozenset({"true"}),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1,
        shell_sandbox=ShellSandbox(requested=kind, kind=kind), workspace_max_bytes=1024**3,
    )


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(runs: int, files: int) -> None:
    kinds = [k for k in KINDS if not (k == "bwrap" and bwrap_error()) and not (k == "landlock" and landlock_error(False))]
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as tmp:
        workspace = Path(tmp).resolve()
        for index in range(files):
            folder = workspace / f"d{index // 100}"
            folder.mkdir(exist_ok=True)
            (folder / f"f{index}.txt").write_text("x" * 100)
        policies = {kind: _policy(workspace, kind) for kind in kinds}
        samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        for kind in kinds:  # warm-up: page cache, first bwrap exec
            await run_command(["true"], policies[kind], tool="bench")
        for _ in range(runs):
            for kind in kinds:
                started = time.perf_counter()
                result = await run_command(["true"], policies[kind], tool="bench")
                samples[kind].append((time.perf_counter() - started) * 1000)
                assert result.startswith("exit code: 0\n"), result
    base50, base95 = _percentile(samples["none"], 0.5), _percentile(samples["none"], 0.95)
    print(f"shell `true`, {runs} runs per kind, interleaved, {files} files in the workspace (ms)")
    print(f"{'kind':<10}{'p50':>8}{'p95':>8}{'+p50':>9}{'+p95':>9}{'ratio p50':>11}")
    for kind in kinds:
        p50, p95 = _percentile(samples[kind], 0.5), _percentile(samples[kind], 0.95)
        print(f"{kind:<10}{p50:>8.2f}{p95:>8.2f}{p50 - base50:>+9.2f}{p95 - base95:>+9.2f}{p50 / base50:>10.2f}x")
    print(f"median of all none runs: {statistics.median(samples['none']):.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.files))
