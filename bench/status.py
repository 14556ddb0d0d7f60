"""Measure what the status document costs: `build_status` in process, the socket round trip, the CLI.

Run from the repository root::

    .venv/bin/python bench/status.py [--runs N] [--rows N]

A `Runtime` on a fresh state dir with `--rows` unfinished inbox rows (the document counts
them with one query) serves the status socket in this process; the figures are the time to
build the document, to ask for it over the socket (a blocking client in a thread, as
`orchestrator status` does), and the wall time of a whole `orchestrator status --json`
subprocess (interpreter start and config load included). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.daemon import Runtime, serve_status_socket  # noqa: E402
from orchestrator.status_client import ask_status  # noqa: E402

CONFIG = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"

[agents.a]
provider = "local"
model = "m"
"""


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return f"p50 {p50:.3f} ms, p99 {p99:.3f} ms"


async def measure(runs: int, rows: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text(CONFIG, encoding="utf-8")
        config = load_config(path)
        async with Runtime.open(config, config_path=path) as runtime:
            for index in range(rows):
                runtime.store.accept("bench", f"e{index}", {"text": "x"})
            async with serve_status_socket(runtime):
                built = []
                for _ in range(runs):
                    started = time.perf_counter()
                    runtime.status_document()
                    built.append(time.perf_counter() - started)
                asked = []
                for _ in range(runs):
                    started = time.perf_counter()
                    await asyncio.to_thread(ask_status, config.state_path())
                    asked.append(time.perf_counter() - started)
                cli = []
                for _ in range(max(3, runs // 100)):
                    started = time.perf_counter()
                    await asyncio.to_thread(
                        subprocess.run,
                        [sys.executable, "-m", "orchestrator.cli", "status", "--json", "--config", str(path)],
                        cwd=ROOT, check=True, capture_output=True,
                    )
                    cli.append(time.perf_counter() - started)
    print(f"inbox rows unfinished: {rows}")
    print(f"build_status:            {percentiles(built)} ({runs} runs)")
    print(f"socket round trip:       {percentiles(asked)} ({runs} runs)")
    print(f"orchestrator status CLI: {percentiles(cli)} ({len(cli)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=20, rows=20)
    args = parser.parse_args()
    asyncio.run(measure(args.runs, args.rows))


if __name__ == "__main__":
    main()
