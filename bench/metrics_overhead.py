"""Measure what metrics and traces add to a turn: the same turns with them off, metrics on, and both on.

Run from the repository root::

    .venv/bin/python bench/metrics_overhead.py [--turns N] [--rounds R]

One process, no network: each mode is a real `Runtime` (its `Sessions`, stored transcripts,
audit log) whose provider pool answers in-process at once, so the orchestrator, not a model,
is what is measured and the overhead is at its largest relative share. A turn is the
gateway's: user message -> the model asks for `list_dir {}` -> the tool runs -> the model
answers (two model requests, one tool call). "metrics" is `[gateway] metrics = true`;
"traced" adds `[telemetry] exporter = "none"` (spans made and dropped: no collector's I/O).
The modes are run in interleaved rounds so drift on a busy machine hits all alike, and each
round runs its turns in a fresh session per turn batch (a constant history window).

Also: the cost of one `/metrics` exposition after the run (the scrape-time gauges included).
The target (metrics within 5% of off) is printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.daemon import Runtime  # noqa: E402
from orchestrator.providers import ProviderPool, ToolCall  # noqa: E402
from orchestrator.seam import Services, build_gateway_chat  # noqa: E402
from bench.fake_provider import FakeProvider, calls_then_text  # noqa: E402

MODES: Final = ("off", "metrics", "traced")
_TARGET: Final = 0.05

_CONFIG: Final = """
[daemon]
state_dir = "./state-{mode}"

[providers.fake]
base_url = "http://127.0.0.1:9/v1"

[agents.bench]
provider = "fake"
model = "bench-model"
tools = ["list_dir"]

[agents.bench.approval]
auto_approve = ["list_dir"]

[agents.bench.budget]
max_actions_per_hour = 100000000
max_history_messages = 40
{gateway}
{telemetry}
"""


def _config_text(mode: str) -> str:
    gateway = "[gateway]\nport = 0\nmetrics = true\n" if mode != "off" else ""
    telemetry = '[telemetry]\nexporter = "none"\n' if mode == "traced" else ""
    return _CONFIG.format(mode=mode, gateway=gateway, telemetry=telemetry)


@asynccontextmanager
async def _runtime(folder: Path, mode: str) -> AsyncIterator[Runtime]:
    path = folder / f"{mode}.toml"
    path.write_text(_config_text(mode), encoding="utf-8")
    config = load_config(path)
    provider = FakeProvider(calls_then_text([ToolCall(id="c1", name="list_dir", arguments="{}")], "done"))
    services = Services(providers=ProviderPool(factory=provider.factory))
    async with Runtime.open(config, config_path=path, services=services) as runtime:
        yield runtime


async def _turns(runtime: Runtime, count: int, round_: int) -> list[float]:
    execution = build_gateway_chat(runtime.config, "bench", runtime.services)
    times: list[float] = []
    for i in range(count):
        session = f"@gateway:bench:r{round_}-{i // 10}"  # ten turns per session: a short, steady window
        started = time.perf_counter_ns()
        turn = await runtime.sessions.run_turn(
            session, agent="bench", execution=execution, text=f"turn {i}", approver=None, actor="gateway",
        )
        times.append((time.perf_counter_ns() - started) / 1000.0)
        if turn.completed().text != "done":
            raise SystemExit(f"unexpected reply: {turn.completed().text!r}")
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(turns: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as tmp:
        folder = Path(tmp)
        async with _runtime(folder, "off") as off, _runtime(folder, "metrics") as on, _runtime(folder, "traced") as traced:
            runtimes = {"off": off, "metrics": on, "traced": traced}
            for runtime in runtimes.values():  # warm-up: imports, SQLite pages, caches
                await _turns(runtime, 50, -1)
            figures: dict[str, list[float]] = {mode: [] for mode in MODES}
            medians: dict[str, list[float]] = {mode: [] for mode in MODES}
            gc.collect()
            for round_ in range(rounds):
                order = MODES if round_ % 2 == 0 else tuple(reversed(MODES))
                for mode in order:
                    times = await _turns(runtimes[mode], turns, round_)
                    figures[mode].extend(times)
                    medians[mode].append(statistics.median(times))
            metrics = on.observability.metrics
            assert metrics is not None
            scrapes = []
            for _ in range(200):
                started = time.perf_counter_ns()
                body = metrics.exposition()
                scrapes.append((time.perf_counter_ns() - started) / 1000.0)
            counted = metrics.sample(
                "orchestrator_turns_total", {"agent": "bench", "channel": "-", "path": "gateway_chat", "stop": "completed"}
            )
    base = statistics.median(medians["off"])
    print(f"metrics_overhead: {rounds} rounds x {turns} turns per mode (2 model requests + 1 tool call each)")
    print(f"{'mode':<8} {'p50 us':>9} {'p95 us':>9} {'median of round p50s':>22} {'vs off':>8}")
    for mode in MODES:
        mid = statistics.median(medians[mode])
        print(
            f"{mode:<8} {_pct(figures[mode], 0.5):>9.1f} {_pct(figures[mode], 0.95):>9.1f} {mid:>22.1f} "
            f"{(mid / base - 1) * 100:>+7.1f}%"
        )
    metrics_cost = statistics.median(medians["metrics"]) / base - 1
    verdict = "ok" if metrics_cost <= _TARGET else "over"
    print(f"target: metrics within {_TARGET:.0%} of off: {metrics_cost:+.1%} ({verdict})")
    print(f"one /metrics exposition: p50 {_pct(scrapes, 0.5):.0f} us, p95 {_pct(scrapes, 0.95):.0f} us ({len(body)} bytes)")
    print(f"turns counted by the metrics run: {counted:.0f}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per mode per round (default 200)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=10, rounds=1)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.rounds))


if __name__ == "__main__":
    cli()
