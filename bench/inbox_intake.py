"""Measure what accepting one chat message costs before the platform may be told (the inbox write and its sync).

Run from the repository root::

    .venv/bin/python bench/inbox_intake.py [--messages N] [--concurrency C] [--state-dir DIR]

Admits N messages (each its own chat, so none waits behind another) into a real
`sessions.sqlite3` through the daemon's `admit`, three ways: the inbox write alone (what
`deliver` did before the sync: durable against a crash of the process, not of the machine),
the write then `Runtime.inbox_sync` one message at a time (a platform that delivers one by
one, such as Telegram polling), and the same with C deliveries at once (webhooks, Slack,
several channels), which share their fsyncs. Prints microseconds per message (mean, p50,
p99) and each against the write alone; nothing is asserted. The state dir decides the disk
measured (default: a temporary folder under the current directory).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import tomllib
from pathlib import Path

from channels import Inbound
from orchestrator.checks import parse_config
from orchestrator.daemon import Runtime
from orchestrator.daemon.admission import admit

_CONFIG = """
[daemon]
state_dir = "{state}"

[providers.fake]
base_url = "http://127.0.0.1:9/v1"

[agents.a]
provider = "fake"
model = "m"

[channels.bot]
kind = "telegram"
token = "env:UNUSED"

[[routes]]
channel = "bot"
agent = "a"
senders = ["*"]
"""


def _message(index: int) -> Inbound:
    return Inbound(is_direct=True, channel="bot", chat=str(index), sender=str(index), text="hello there", event_id=f"e{index}",
                   message_id=str(index))


async def _run(messages: int, concurrency: int, state: Path) -> None:
    config = parse_config(tomllib.loads(_CONFIG.format(state=state)))
    async with Runtime.open(config) as runtime:
        counter = iter(range(10**9))

        async def one(synced: bool) -> float:
            started = time.perf_counter()
            admit(runtime, _message(next(counter)))
            if synced:
                await runtime.inbox_sync.wait()
            return time.perf_counter() - started

        rows: dict[str, list[float]] = {}
        for _ in range(50):  # warm the store and the thread pool
            await one(True)
        rows["write alone (before)"] = [await one(False) for _ in range(messages)]
        rows["write + sync, one at a time"] = [await one(True) for _ in range(messages)]
        batched: list[float] = []
        for _ in range(max(messages // concurrency, 1)):
            started = time.perf_counter()
            await asyncio.gather(*(one(True) for _ in range(concurrency)))
            batched.append((time.perf_counter() - started) / concurrency)
        rows[f"write + sync, {concurrency} at once (per message)"] = batched
        base = statistics.mean(rows["write alone (before)"])
        syncs = runtime.store.wal_sync.syncs
    print(f"{messages} messages per way; state dir {state}; fsyncs in all: {syncs}")
    for name, times in rows.items():
        ordered = sorted(times)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        mean = statistics.mean(times)
        print(f"  {name:45} mean {mean * 1e6:8.1f} us  p50 {statistics.median(times) * 1e6:8.1f} us"
              f"  p99 {p99 * 1e6:8.1f} us  {mean / base:6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=40)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(messages=20, concurrency=4)
    args = parser.parse_args()
    if args.state_dir is not None:
        asyncio.run(_run(args.messages, args.concurrency, args.state_dir))
        return
    with tempfile.TemporaryDirectory(dir=".") as folder:
        asyncio.run(_run(args.messages, args.concurrency, Path(folder)))


if __name__ == "__main__":
    main()
