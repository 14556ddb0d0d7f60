"""Measure what recording a model call's usage costs the event loop (the meter and the usage table).

Run from the repository root::

    .venv/bin/python bench/usage_record.py [--calls N]

Records N calls through `UsageMeter.record` into a fresh `usage.sqlite3` (queued, written in
batches by the event-loop timer or at 256 rows, as the daemon does), then times the daily
budget check (`spent_today`) over 300 senders. Prints per-call microseconds, p50 and p99 of
the record call, and the flush share; nothing is asserted.
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


async def _run(calls: int, folder: Path) -> None:
    usage = Usage(input_tokens=1200, output_tokens=80, cached_tokens=1000)
    with UsageLog(folder / "usage.sqlite3") as log:
        meter = UsageMeter(log=log)
        each: list[float] = []
        start = time.perf_counter()
        for n in range(calls):
            t = time.perf_counter()
            meter.record(binding=_BINDING, provider="p", model="m", usage=usage, estimated=False, agent="a",
                         path="channel", sender=f"tg:{n % 300}", session=f"s{n % 300}")
            each.append(time.perf_counter() - t)
            if n % 64 == 0:
                await asyncio.sleep(0)  # let the flush timer run, as between turns
        total = time.perf_counter() - start
        t = time.perf_counter()
        for n in range(calls):
            meter.spent_today(budget_key("a", f"tg:{n % 300}"))
        check = (time.perf_counter() - t) / calls
    each.sort()
    print(f"usage record: {calls:,} calls, {total / calls * 1e6:.1f} us per call (batched writes included)")
    print(f"  record call p50 {statistics.median(each) * 1e6:.1f} us, p99 {each[int(len(each) * 0.99)] * 1e6:.1f} us "
          f"(the p99 holds the 256-row flushes)")
    print(f"  daily budget check (spent_today): {check * 1e6:.2f} us")


def main() -> None:
    """Run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_run(args.calls, Path(folder)))


if __name__ == "__main__":
    main()
