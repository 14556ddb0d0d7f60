"""Measure what rendering an approval's text costs: the printable set, blank runs, mixed scripts.

Run from the repository root::

    .venv/bin/python bench/approval_text.py [--repeat N]

Renders a few calls N times each with `ApprovalArguments.of` (what the core does once per
approval), then fits each to a Telegram prompt (`fit(4000)`) and splits it for `/show`
(`lines()`): a short ASCII call, a 6,000-character command, the same with a Cyrillic word,
fillers and 1,500 ideographic spaces, 6,000 characters of Japanese, and a 100,000-character
file. Prints microseconds per call (p50 and p99) and per 1,000 characters; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from orchestrator.policy import ApprovalArguments

_CALLS: dict[str, dict[str, Any]] = {
    "short ascii": {"path": "notes/today.txt", "content": "buy milk"},
    "6k ascii command": {"command": "echo " + "x" * 3000 + "; rm -rf ~ ;" + "y" * 3000},
    "6k look-alikes": {
        "path": "рasswd.txt",
        "command": "ls a\u3164.txt x\u034fy z\ufe0f" + "\u3000" * 1500 + "; rm -rf ~ " + "w" * 4400,
    },
    "6k japanese": {"content": "日本語のテキストとカタカナ" * 460},
    "100k file": {"path": "big.txt", "content": ("line of text number 12345\n" * 3850)},
}


def _time(work: Callable[[], object], repeat: int) -> list[float]:
    each = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        each.append(time.perf_counter() - start)
    return sorted(each)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(repeat=3)
    args = parser.parse_args()
    print(f"{'call':<18} {'chars':>8} {'render p50 us':>14} {'p99 us':>9} {'us/1k chars':>12} {'fit+lines us':>13}")
    for name, arguments in _CALLS.items():
        chars = sum(len(str(v)) for v in arguments.values())
        renders = _time(lambda: ApprovalArguments.of(arguments), args.repeat)
        shown = ApprovalArguments.of(arguments)
        fits = _time(lambda: (shown.fit(4000), shown.lines()), args.repeat)
        p50, p99 = statistics.median(renders) * 1e6, renders[int(len(renders) * 0.99) - 1] * 1e6
        print(f"{name:<18} {chars:>8,} {p50:>14.0f} {p99:>9.0f} {p50 / chars * 1000:>12.1f} {statistics.median(fits) * 1e6:>13.0f}")


if __name__ == "__main__":
    main()
