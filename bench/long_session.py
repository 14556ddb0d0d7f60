"""Measure a long session's per-turn cost: it should stay flat, not grow with the session.

Run from the repository root::

    .venv/bin/python bench/long_session.py [--messages N] [--buckets B]

One process, loopback only. One chat session runs N/2 turns (default 5,000 messages)
through `Sessions.run_turn` on the channel path, with transcripts in a real SQLite session
store, against the fake OpenAI server; the fake's summary model echoes the facts it is
given, so the running summary grows like a real one would, up to its cap. Each strategy
(`window`, `summarize`) runs its own session with `max_context_tokens = 4000`. Each long
turn alternates with a turn of a short session (a fresh one every 20 turns), so the load of a
busy machine hits both alike. Per bucket of turns it prints the median and p95 long-session
turn time, the short-session median, their ratio, the mean request size the model was sent
(estimated tokens), and the summarizing calls; the last line compares the last bucket with
the first full one (target: about 1.0x, flat). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/long_session.py`

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.engine.context import estimate_message, estimate_specs  # noqa: E402
from orchestrator.seam import ConstructionPath, Services, resolve  # noqa: E402
from orchestrator.sessions import Sessions, StoredTranscripts  # noqa: E402
from orchestrator.store import SessionStore  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, text  # noqa: E402

LIMIT: Final = 4_000
FILLER: Final = "status of the deployment and the on-call rota, please " * 2
SUMMARIZER: Final = "You keep the running summary"

CONFIG: Final = """\
[daemon]
state_dir = "{state}"

[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.bench]
provider = "fake"
model = "bench-model"
system_prompt = "You are a benchmark agent."

[agents.bench.budget]
max_history_messages = 200

[agents.bench.context]
max_context_tokens = {limit}
strategy = "{strategy}"
keep_recent = 8
"""


def respond(body: dict[str, Any]) -> Reply:
    first = body["messages"][0]
    if first["role"] == "system" and str(first["content"]).startswith(SUMMARIZER):
        found = re.findall(r"fact-\d+", "\n".join(str(m.get("content")) for m in body["messages"]))
        return text("facts: " + " ".join(dict.fromkeys(found)))
    return text("noted")


def tokens(body: dict[str, Any]) -> int:
    return sum(estimate_message(m) for m in body["messages"]) + estimate_specs(body.get("tools", []))


Row = tuple[float, float, float, float, int]  # long median, long p95, short median, sent tokens, folds


async def run(strategy: str, messages: int, buckets: int) -> list[Row]:
    turns = messages // 2
    per = max(1, turns // buckets)
    with tempfile.TemporaryDirectory() as folder:
        async with FakeOpenAI(default=respond) as fake:
            path = Path(folder) / "config.toml"
            path.write_text(CONFIG.format(state=Path(folder) / "state", base_url=fake.base_url, limit=LIMIT, strategy=strategy))
            config = load_config(path)
            services = Services()
            rows: list[Row] = []
            try:
                with SessionStore(Path(folder) / "sessions.sqlite3") as store:
                    sessions = Sessions(transcripts=StoredTranscripts(store))
                    main_sent: list[dict[str, Any]] = []  # the long session's requests of this bucket
                    samples: list[float] = []
                    short: list[float] = []

                    async def turn(key: str, n: int) -> float:
                        started = time.perf_counter_ns()
                        await sessions.run_turn(
                            key, agent="bench",
                            execution=lambda: resolve(config, "bench", path=ConstructionPath.CHANNEL, services=services),
                            text=f"fact-{n}: {FILLER}", approver=None, actor="bench:alice",
                        )
                        return (time.perf_counter_ns() - started) / 1e6

                    for n in range(turns):
                        long_requests = len(fake.requests)
                        samples.append(await turn("chat", n))
                        main_sent.extend(fake.requests[long_requests:])
                        short.append(await turn(f"short-{n // 20}", n))
                        if len(samples) == per:
                            main = [r for r in main_sent if not str(r["messages"][0]["content"]).startswith(SUMMARIZER)]
                            folds = len(main_sent) - len(main)
                            size = statistics.mean(tokens(r) for r in main)
                            ordered = sorted(samples)
                            rows.append((
                                statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1],
                                statistics.median(short), size, folds,
                            ))
                            samples, short = [], []
                            main_sent.clear()
                            fake.requests.clear()
            finally:
                await services.providers.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5_000, help="messages in the session (two per turn)")
    parser.add_argument("--buckets", type=int, default=10, help="how many groups of turns to report")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(messages=40, buckets=2)
    args = parser.parse_args()
    print(f"long session: {args.messages} messages ({args.messages // 2} turns), max_context_tokens = {LIMIT}")
    for strategy in ("window", "summarize"):
        rows = asyncio.run(run(strategy, args.messages, args.buckets))
        per = args.messages // 2 // args.buckets
        print(f"\nstrategy = {strategy!r}")
        print(f"{'turns':>13} {'median ms':>10} {'p95 ms':>8} {'short ms':>9} {'long/short':>10} {'sent tokens':>12} {'folds':>6}")
        for i, (median, p95, short, size, folds) in enumerate(rows):
            print(
                f"{i * per + 1:>6}-{(i + 1) * per:<6} {median:>10.2f} {p95:>8.2f} {short:>9.2f} "
                f"{median / short:>10.2f} {size:>12.0f} {folds:>6}"
            )
        first = rows[1] if len(rows) > 1 else rows[0]  # the first bucket is still filling the window
        print(
            f"last bucket / second bucket: long/short {(rows[-1][0] / rows[-1][2]) / (first[0] / first[2]):.2f}x, "
            f"median {rows[-1][0] / first[0]:.2f}x, sent tokens {rows[-1][3] / first[3]:.2f}x (target: about 1.0x, flat)"
        )


if __name__ == "__main__":
    main()
