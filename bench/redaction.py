"""Measure what the one redaction costs a log line and a tool result, beside writing the line.

Run from the repository root::

    .venv/bin/python bench/redaction.py [--secrets N] [--rounds R]

Registers N secret values shaped like real ones (bot tokens, API keys), then times
`redact()` on the daemon's per-turn INFO line, on a DEBUG line of python-telegram-bot with a
bot URL in it (the case that is rewritten), and on a 16,000-character tool result (the
default `max_tool_result_chars`) with no secret, with one, with one in base64 wrapped at 76
columns as `base64` prints it, and with one split by a newline; then the JSON log sink on a
line with no secret (its probe) and with a split one (decoded, redacted, encoded again).
Beside them: writing the INFO line through loguru to a file without redaction, so the added
share is visible, and the literal matching the redactor did before issue 24 (each value and
its JSON form found with `str` operations; no encodings, no whitespace, no windows) on the
same texts, under the same load, so the ratio shows what the forms cost. Figures are medians
and p99 of R rounds, printed, never asserted.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import re
import secrets
import statistics
import string
import tempfile
import textwrap
import time
from collections.abc import Callable

from orchestrator import logs
from orchestrator.redaction import Redactor, register_secret

INFO_LINE = (
    "INFO    orchestrator.daemon.turns: turn tg:42 from 7 by ops: completed in 1.84s, "
    "tools run: file_read,list_dir\n"
)
_BOT_TOKEN = re.compile(r"(/bot)\d+:[A-Za-z0-9_-]+")  # as the redactor has it
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


def literal(values: list[str]) -> Callable[[str], str]:
    """The redactor before issue 24, for the ratio: bot URLs, then each value and its JSON form, longest first."""
    ordered = sorted({f for v in values for f in (v, json.dumps(v)[1:-1])}, key=len, reverse=True)

    def redact(text: str) -> str:
        if "/bot" in text:
            text = _BOT_TOKEN.sub(r"\1[redacted]", text)
        for value in ordered:
            if value in text:
                text = text.replace(value, "[redacted]")
        return text

    return redact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--secrets", type=int, default=8, help="registered secret values (default 8)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(rounds=3)
    args = parser.parse_args()
    redactor = Redactor()
    values = [f"{random.randint(10**8, 10**9)}:AA{secrets.token_urlsafe(30)}" for _ in range(args.secrets // 2)]
    values += [f"sk-{secrets.token_urlsafe(36)}" for _ in range(args.secrets - len(values))]
    for value in values:
        redactor.register(value)
        register_secret(value)  # the log sink's redactor
    start = time.perf_counter()
    redactor.redact("")  # the automaton is built on the first redact after a registration
    built_ms = (time.perf_counter() - start) * 1e3
    before = literal(values)

    prose = "".join(random.choice(string.ascii_letters + string.digits + "  \n") for _ in range(16_000))
    secret = values[-1]
    with_secret = prose[:8_000] + secret + prose[8_000 + len(secret):]
    encoded = "\n".join(textwrap.wrap(base64.b64encode(b"x" * 40 + secret.encode()).decode(), 76))
    with_base64 = prose[:8_000] + encoded + prose[8_000 + len(encoded):]
    split = f"{secret[:20]}\n{secret[20:]}"
    with_split = prose[:8_000] + split + prose[8_000 + len(split):]
    ptb = PTB_LINE.format(secrets.token_urlsafe(30))

    from loguru import logger

    with tempfile.NamedTemporaryFile("w", delete=False, suffix=".log") as sink:
        path = sink.name
    logger.remove()
    with open(path, "w", encoding="utf-8") as out:
        logger.add(out, level="INFO", format="{level: <7} {name}: {message}", colorize=False, diagnose=False)
        write = timed(lambda: logger.info("turn tg:42 from 7 by ops: completed in 1.84s"), args.rounds, 200)
        logger.remove()
        logger.add(out, level="INFO", serialize=True, diagnose=False)
        write_json = timed(lambda: logger.info("turn tg:42 from 7 by ops: completed in 1.84s"), args.rounds, 200)
        lines: list[str] = []
        logger.remove()
        logger.add(lines.append, level="INFO", serialize=True, diagnose=False)
        logger.info("turn tg:42 from 7 by ops: completed in 1.84s")
        logger.warning("incident 7f3a2c: provider failure for ops: HTTP 401: {}", split)
        logger.remove()
    os.unlink(path)
    json_plain, json_split = (str(line) for line in lines)
    sink_stream = logs.RedactingStream(io.StringIO(), serialized=True)

    rows = [
        ("INFO turn line, no secret", INFO_LINE, 2_000),
        ("PTB DEBUG line with a bot URL", ptb, 2_000),
        ("16,000-char tool result, no secret", prose, 20),
        ("16,000-char tool result, one secret", with_secret, 20),
        ("16,000-char tool result, base64 of one", with_base64, 20),
        ("16,000-char tool result, one split by \\n", with_split, 20),
    ]
    print(f"redaction with {args.secrets} registered secrets ({args.rounds} rounds; µs per call, median / p99)")
    print(f"  automaton built in {built_ms:.1f} ms")
    print(f"  {'loguru writes the INFO line to a file':<44} {write[0]:8.2f} / {write[1]:8.2f}")
    print(f"  {'... as JSON':<44} {write_json[0]:8.2f} / {write_json[1]:8.2f}")
    print(f"  {'':<44} {'now':>19}   {'literal (before)':>19}   ratio")
    info_now = 0.0
    for name, text, inner in rows:
        now = timed(lambda: redactor.redact(text), args.rounds, inner)
        then = timed(lambda: before(text), args.rounds, inner)
        info_now = info_now or now[0]
        print(f"  {name:<44} {now[0]:8.2f} / {now[1]:8.2f}   {then[0]:8.2f} / {then[1]:8.2f}   {now[0] / then[0]:5.1f}x")
    plain = timed(lambda: sink_stream.write(json_plain), args.rounds, 500)
    decoded = timed(lambda: sink_stream.write(json_split), args.rounds, 500)
    print(f"  {'JSON sink line, no secret (the probe)':<44} {plain[0]:8.2f} / {plain[1]:8.2f}")
    print(f"  {'JSON sink line, a split secret (decoded)':<44} {decoded[0]:8.2f} / {decoded[1]:8.2f}")
    print(f"  added to a logged INFO line: {info_now / write[0]:.1%} of writing it; "
          f"to a JSON one: {plain[0] / write_json[0]:.1%}")


if __name__ == "__main__":
    main()
