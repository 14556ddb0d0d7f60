"""Measure what the one redaction costs a log line and a tool result, beside writing the line.

Run from the repository root::

    .venv/bin/python bench/redaction.py [--secrets N] [--rounds R]

Registers N secret values shaped like real ones (bot tokens, API keys), then times
`redact()` on the daemon's per-turn INFO line, on a DEBUG line of python-telegram-bot with a
bot URL in it (the case that is rewritten), and on a 16,000-character tool result (the
default `max_tool_result_chars`) with and without a secret in it. Beside them: writing the
same INFO line through loguru to a file without redaction, so the added share is visible.
Figures are medians and p99 of R rounds, printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import string
import tempfile
import time
from collections.abc import Callable

from orchestrator.redaction import Redactor

INFO_LINE = (
    "INFO    orchestrator.daemon.turns: turn tg:42 from 7 by ops: completed in 1.84s, "
    "tools run: file_read,list_dir\n"
)
PTB_LINE = "DEBUG   telegram._bot: Set Bot API URL: https://api.telegram.org/bot123456:AAH{}\n"


def timed(fn: Callable[[], object], rounds: int, inner: int) -> tuple[float, float]:
    """Return (median, p99) microseconds per call over `rounds` batches of `inner` calls."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--secrets", type=int, default=8, help="registered secret values (default 8)")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    redactor = Redactor()
    values = [f"{random.randint(10**8, 10**9)}:AA{secrets.token_urlsafe(30)}" for _ in range(args.secrets // 2)]
    values += [f"sk-{secrets.token_urlsafe(36)}" for _ in range(args.secrets - len(values))]
    for value in values:
        redactor.register(value)
    prose = "".join(random.choice(string.ascii_letters + string.digits + "  \n") for _ in range(16_000))
    with_secret = prose[:8_000] + values[-1] + prose[8_000 + len(values[-1]):]
    ptb = PTB_LINE.format(secrets.token_urlsafe(30))

    from loguru import logger

    with tempfile.NamedTemporaryFile("w", delete=False, suffix=".log") as sink:
        path = sink.name
    logger.remove()
    with open(path, "w", encoding="utf-8") as out:
        logger.add(out, level="INFO", format="{level: <7} {name}: {message}", colorize=False, diagnose=False)
        write = timed(lambda: logger.info("turn tg:42 from 7 by ops: completed in 1.84s"), args.rounds, 200)
        logger.remove()
    os.unlink(path)

    rows = [
        ("INFO turn line, no secret", timed(lambda: redactor.redact(INFO_LINE), args.rounds, 2_000)),
        ("PTB DEBUG line with a bot URL", timed(lambda: redactor.redact(ptb), args.rounds, 2_000)),
        ("16,000-char tool result, no secret", timed(lambda: redactor.redact(prose), args.rounds, 20)),
        ("16,000-char tool result, one secret", timed(lambda: redactor.redact(with_secret), args.rounds, 20)),
    ]
    print(f"redaction with {args.secrets} registered secrets ({args.rounds} rounds; µs per call, median / p99)")
    print(f"  {'loguru writes the INFO line to a file':<40} {write[0]:8.2f} / {write[1]:8.2f}")
    for name, (median, p99) in rows:
        print(f"  {name:<40} {median:8.2f} / {p99:8.2f}")
    print(f"  added to a logged INFO line: {rows[0][1][0] / write[0]:.1%} of writing it")


if __name__ == "__main__":
    main()
