"""Streamed replies on Slack and Discord against the loopback fakes: latency to first text, calls per reply.

Run: `.venv/bin/python bench/streaming_platforms.py [--trials 20] [--tokens 2000] [--tokens-per-s 200]`

For each platform (Slack in a thread: chat streams; Slack outside threads: post + chat.update;
Discord: send + edit) it measures, through the real SDKs and adapters:

- first visible text: from the first `update` (the model's first token reaching the stream) to
  the fake recording the text, against one plain `send` round trip on the same fake (the target
  is within one round trip + 50 ms);
- a 2,000-token reply (about 4 characters per token) streamed at `--tokens-per-s`: the platform
  calls it cost, how many visible changes, 429s answered, and the longest gap between changes,
  at `stream_edit_interval_s` = `--interval`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/streaming_platforms.py`

from channels import Inbound, Outbound, create_adapter  # noqa: E402
from channels.base import ReplyStream  # noqa: E402
from orchestrator.config.channels import DiscordChannelConfig, SlackChannelConfig  # noqa: E402
from tests.fakes.discord_api import FakeDiscord  # noqa: E402
from tests.fakes.slack_api import FakeSlack  # noqa: E402

THREAD: Final = "1700000000.000100"
DISCORD_DM: Final = "500000000000000001"
CHARS_PER_TOKEN: Final = 4


def _pct(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else math.nan


def _reply_text(tokens: int) -> str:
    words, text, n = [], "", 0
    while len(text) < tokens * CHARS_PER_TOKEN:
        n += 1
        words.append(f"word{n}" + ("\n\n" if n % 40 == 0 else " "))
        text = "".join(words)
    return text.strip()


class Platform:
    """One platform under test: how to open a stream, send once, and read the fake's record."""

    name: str
    open: Callable[[], ReplyStream]
    send_once: Callable[[], Any]
    changes: Callable[[], list[float]]  # monotonic times of the visible changes so far
    calls: Callable[[], int]  # platform calls so far (message and stream methods)
    limited: Callable[[], int]  # 429s answered so far


async def _first_visible(platform: Platform, trials: int, interval: float) -> tuple[list[float], list[float]]:
    firsts, trips = [], []
    for _ in range(trials):
        before = len(platform.changes())
        stream = platform.open()
        started = time.monotonic()
        await stream.update("Hello")
        while len(platform.changes()) == before:
            await asyncio.sleep(0.0005)
        firsts.append(platform.changes()[before] - started)
        await asyncio.sleep(interval)
        await stream.finish("Hello there.")
        await asyncio.sleep(interval)
        started = time.monotonic()
        await platform.send_once()
        trips.append(time.monotonic() - started)
        await asyncio.sleep(interval)
    return firsts, trips


async def _long_reply(platform: Platform, tokens: int, rate: float) -> dict[str, float]:
    text = _reply_text(tokens)
    calls0, changes0, limited0 = platform.calls(), len(platform.changes()), platform.limited()
    stream = platform.open()
    step = CHARS_PER_TOKEN * 5  # five tokens per delta, as providers batch them
    started = time.monotonic()
    for end in range(step, len(text) + step, step):
        await stream.update(text[:end])
        await asyncio.sleep(5 / rate)
    await stream.finish(text)
    took = time.monotonic() - started
    times = platform.changes()[changes0:]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {
        "seconds": took,
        "calls": platform.calls() - calls0,
        "changes": len(times),
        "messages": len(stream.message_ids),
        "429s": platform.limited() - limited0,
        "max_gap_s": max(gaps, default=0.0),
    }


@asynccontextmanager
async def _slack(interval: float, *, threaded: bool) -> AsyncIterator[Platform]:
    async with FakeSlack() as fake:
        settings = {
            "kind": "slack", "bot_token": "env:BOT", "app_token": "env:APP", "api_base_url": fake.api_base_url,
            "socket_ping_interval_s": 5.0, "stream_edit_interval_s": interval,
        }
        tokens = {"env:BOT": fake.bot_token, "env:APP": fake.app_token}
        adapter: Any = create_adapter("slack", SlackChannelConfig.model_validate(settings), secrets=lambda ref: tokens[ref])
        ready = asyncio.Event()
        asked = asyncio.Event()

        async def deliver(item: object) -> None:
            if isinstance(item, Inbound):
                asked.set()

        async with adapter, asyncio.TaskGroup() as tasks:
            runner = tasks.create_task(adapter.run(deliver, ready.set))
            await ready.wait()
            await fake.wait_connections(1)
            thread = THREAD if threaded else None
            await fake.push_message("question", user="U0001", thread_ts=thread)
            await asked.wait()
            kinds = ("chat.postMessage", "chat.update", "chat.delete", "chat.startStream", "chat.appendStream",
                     "chat.stopStream")
            platform = Platform()
            platform.name = "slack (thread: chat stream)" if threaded else "slack (post + chat.update)"
            platform.open = lambda: adapter.open_stream(Outbound(chat="D0001", text="", thread=thread))
            platform.send_once = lambda: adapter.send(Outbound(chat="D0001", text="ping", thread=thread))
            platform.changes = lambda: [c.at for c in fake.messages.changes if c.kind != "status"]
            platform.calls = lambda: sum(1 for call in fake.requests if call.method in kinds)
            platform.limited = lambda: 0
            try:
                yield platform
            finally:
                runner.cancel()


@asynccontextmanager
async def _discord(interval: float) -> AsyncIterator[Platform]:
    async with FakeDiscord(token="bench-token") as fake:
        fields = {
            "kind": "discord", "token": "env:DISCORD", "api_base_url": fake.api_base_url,
            "guild_ready_timeout_s": 0.05, "stream_edit_interval_s": interval,
        }
        adapter: Any = create_adapter("dc", DiscordChannelConfig.model_validate(fields), secrets=lambda _: "bench-token")
        ready = asyncio.Event()

        async def deliver(item: object) -> None:
            return None

        try:
            async with asyncio.TaskGroup() as tasks:
                runner = tasks.create_task(adapter.run(deliver, ready.set))
                await ready.wait()
                platform = Platform()
                platform.name = "discord (send + edit)"
                platform.open = lambda: adapter.open_stream(Outbound(chat=DISCORD_DM, text=""))
                platform.send_once = lambda: adapter.send(Outbound(chat=DISCORD_DM, text="ping"))
                platform.changes = lambda: [c.at for c in fake.messages.changes]
                platform.calls = lambda: sum(
                    1 for r in fake.requests if r.method in ("POST", "PATCH", "DELETE") and "/messages" in r.path
                )
                platform.limited = lambda: fake.messages.rate_limited
                try:
                    yield platform
                finally:
                    runner.cancel()
        finally:
            await adapter.aclose()


async def main(trials: int, tokens: int, rate: float, interval: float) -> None:
    print(f"streamed replies: {trials} first-text trials, one {tokens}-token reply at {rate:g} tokens/s, "
          f"stream_edit_interval_s={interval:g}")
    print(f"{'platform':30} {'first text p50/p90 ms':>22} {'round trip p50 ms':>18} {'over RT ms':>10} "
          f"{'calls':>6} {'changes':>8} {'msgs':>5} {'429s':>5} {'max gap s':>9} {'reply s':>8}")
    platforms: list[Callable[[], Any]] = [
        lambda: _slack(interval, threaded=True),
        lambda: _slack(interval, threaded=False),
        lambda: _discord(interval),
    ]
    for make in platforms:
        async with make() as platform:
            firsts, trips = await _first_visible(platform, trials, interval)
            long = await _long_reply(platform, tokens, rate)
        first50, first90, trip50 = _pct(firsts, 0.5) * 1e3, _pct(firsts, 0.9) * 1e3, statistics.median(trips) * 1e3
        print(f"{platform.name:30} {first50:>10.1f} / {first90:<9.1f} {trip50:>18.1f} {first50 - trip50:>10.1f} "
              f"{long['calls']:>6.0f} {long['changes']:>8.0f} {long['messages']:>5.0f} {long['429s']:>5.0f} "
              f"{long['max_gap_s']:>9.2f} {long['seconds']:>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--tokens-per-s", type=float, default=200.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(trials=1, tokens=60, tokens_per_s=600.0, interval=0.05)
    args = parser.parse_args()
    asyncio.run(main(args.trials, args.tokens, args.tokens_per_s, args.interval))
