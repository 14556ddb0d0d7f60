"""Measure what pairing and rate limits add to admitting one message: the per-message reads.

Run from the repository root::

    .venv/bin/python bench/admission_gates.py [--n N] [--quick]

Times, per message, `match_route` on a plain route (the baseline), the same on a route that
pairs strangers with the stored-pairing read (`PairingStore.routes_of` on a store holding
10,000 paired senders), `RateWindows.hit` over 10,000 active senders, and a stranger's code
offer (`PairingStore.offer` for a sender holding a code). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

from orchestrator.config import Config
from orchestrator.daemon import match_route
from orchestrator.seam import CODE_ALPHABET, CODE_LENGTH, CODE_TTL_S, resolve_admission
from orchestrator.store import PairingStore, RateWindows

TOML = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[agents.a]
provider = "p"
model = "m"
[channels.tg]
kind = "terminal"
[[routes]]
channel = "tg"
agent = "a"
senders = ["7"]
approvers = ["7"]
strangers = "{strangers}"
rate_limit = {{ messages = 5, per_s = 60 }}
"""


def per_call_us(work: Callable[[int], object], n: int) -> tuple[float, float]:
    """Return the median and p99 of `work(i)` in microseconds over `n` calls (in blocks of 100)."""
    blocks = []
    for start in range(0, n, 100):
        t0 = time.perf_counter()
        for i in range(start, start + 100):
            work(i)
        blocks.append((time.perf_counter() - t0) / 100 * 1e6)
    blocks.sort()
    return statistics.median(blocks), blocks[int(len(blocks) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    args = parser.parse_args()
    n = 1_000 if args.quick else args.n
    plain = Config.model_validate(tomllib.loads(TOML.format(strangers="ignore")))
    pairing = Config.model_validate(tomllib.loads(TOML.format(strangers="pair")))
    rid = resolve_admission(pairing.routes[0]).route_id
    with tempfile.TemporaryDirectory() as tmp:
        store = PairingStore(Path(tmp) / "pairing.sqlite3", alphabet=CODE_ALPHABET, length=CODE_LENGTH, ttl_s=CODE_TTL_S)
        now = time.time()
        for i in range(10_000):
            code = store.offer(channel="tg", route=rid, sender=f"s{i}", chat=f"s{i}", sender_name=None, now=now, max_pending=1)
            assert code.code is not None
            store.approve(code.code, by="tg:7", now=now)
        store.offer(channel="tg", route=rid, sender="waiting", chat="waiting", sender_name=None, now=now, max_pending=3)
        windows = RateWindows()
        base = per_call_us(lambda i: match_route(plain, channel="tg", chat="7", sender="7"), n)
        paired = per_call_us(
            lambda i: match_route(
                pairing, channel="tg", chat="x", sender=f"s{i % 10_000}", paired=store.routes_of("tg", f"s{i % 10_000}")
            ),
            n,
        )
        limited = per_call_us(lambda i: windows.hit(("r", "tg", "c", i % 10_000), now=i * 0.001, messages=5, per_s=60), n)
        offered = per_call_us(
            lambda i: store.offer(channel="tg", route=rid, sender="waiting", chat="waiting", sender_name=None, now=now, max_pending=3),
            n // 10,
        )
        store.close()
    print(f"match_route, plain route:                     median {base[0]:6.2f} us  p99 {base[1]:6.2f} us")
    print(f"match_route + stored pairings (10k paired):   median {paired[0]:6.2f} us  p99 {paired[1]:6.2f} us"
          f"  ({paired[0] / base[0]:.1f}x)")
    print(f"RateWindows.hit (10k senders):                median {limited[0]:6.2f} us  p99 {limited[1]:6.2f} us")
    print(f"PairingStore.offer, code already held:        median {offered[0]:6.2f} us  p99 {offered[1]:6.2f} us")


if __name__ == "__main__":
    main()
