"""Measure what recording a model call's usage costs the event loop (the meter and the usage table).

Run from the repository root::

    .venv/bin/python bench/usage_record.py [--calls N]

Records N calls through `UsageMeter.record` into a fresh `usage.sqlite3` (queued, written in
batches by the event-loop timer or at 256 rows, as the daemon does), then times the daily
budget check (`spent_today`) over 300 senders. With `--calls-per-turn K` (default 3) the
queue is also flushed after every K calls, as the engine does when a turn ends (so a turn's
rows are on disk before its transcript and reply); `--calls-per-turn 0` measures the timer
batching alone. Prints per-call microseconds, p50 and p99 of the record call, and the
turn-end flush; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.providers import ModelBinding, Prices, Usage
from orchestrator.seam import UsageMeter, budget_key
from orchestrator.store import UsageLog

_BINDING = ModelBinding(
    provider="p", kind="openai", base_url="http://127.0.0.1:9/v1", model="m", temperature=None, api_key=None,
    api_key_env=None, base_url_env=None, model_env=None, base_url_from_env=False, timeout_s=1.0, max_retries=0,
    prices=Prices(input=1.0, output=2.0, cached_input=0.5),
)


async def _run(calls: int, per_turn: int, folder: Path) -> None:
    usage = Usage(input_tokens=1200, output_tokens=80, cached_tokens=1000)
    with UsageLog(folder / "usage.sqlite3") as log:
        meter = UsageMeter(log=log)
        each: list[float] = []
        flushes: list[float] = []
        start = time.perf_counter()
        for n in range(calls):
            t = time.perf_counter()
            meter.record(binding=_BINDING, provider="p", model="m", usage=usage, estimated=False, agent="a",
                         path="channel", sender=f"tg:{n % 300}", session=f"s{n % 300}")
            each.append(time.perf_counter() - t)
            if per_turn and n % per_turn == per_turn - 1:  # a turn ends: its rows go to disk now
                t = time.perf_counter()
                meter.flush()
                flushes.append(time.perf_counter() - t)
            if n % 64 == 0:
                await asyncio.sleep(0)  # let the flush timer run, as between turns
        total = time.perf_counter() - start
        t = time.perf_counter()
        for n in range(calls):
            meter.spent_today(budget_key("a", f"tg:{n % 300}"))
        check = (time.perf_counter() - t) / calls
    each.sort()
    mode = f"a turn-end flush every {per_turn} calls" if per_turn else "timer batching only"
    print(f"usage record: {calls:,} calls, {mode}, {total / calls * 1e6:.1f} us per call (all writes included)")
    print(f"  record call p50 {statistics.median(each) * 1e6:.1f} us, p99 {each[int(len(each) * 0.99)] * 1e6:.1f} us "
          f"(the p99 holds the 256-row flushes)")
    print(f"  daily budget check (spent_today): {check * 1e6:.2f} us")
    if flushes:
        flushes.sort()
        print(f"  turn-end flush p50 {statistics.median(flushes) * 1e6:.1f} us, "
              f"p99 {flushes[int(len(flushes) * 0.99)] * 1e6:.1f} us (one commit per turn)")


def main() -> None:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--calls-per-turn", type=int, default=3, help="model calls per turn; 0 = no turn-end flush")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(calls=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_run(args.calls, args.calls_per_turn, Path(folder)))


if __name__ == "__main__":
    main()
