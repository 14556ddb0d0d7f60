"""Measure what an inbound image adds to a chat turn, and the daemon's memory under 50 at once.

Run from the repository root::

    .venv/bin/python bench/media.py [--turns N] [--concurrent C] [--size BYTES] [--latency S]

The daemon is a real `python -m orchestrator.cli run` subprocess with one Telegram channel
(python-telegram-bot) pointed at FakeTelegram, its agent a vision agent on FakeOpenAI (zero
latency), both served by this process on 127.0.0.1, so the daemon's RSS holds only what the
daemon holds.

(a) Latency: N text turns and N turns of a captionless SIZE-byte photo (default 1 MB),
    alternated; a turn is push to reply seen by the fake. The text turns share one chat;
    each photo goes to a chat of its own, so its request carries that one image (in one
    chat the history window would re-send every earlier photo). The image turn pays
    getFile, the streamed download into the workspace, the signature check and the base64
    data URL in the model request. Reported: p50/p95 of each and the added p50.
(b) Memory: C chats (default 50) each send a SIZE-byte photo at once; the daemon's VmRSS
    is sampled from /proc every 5 ms from before the burst until every reply arrived.
    Reported: the peak over the settled baseline beside the attachments' total size
    (target: at most ~2x held at a time). `--latency S` makes the fake model take S
    seconds per answer, so the burst's requests are all in flight together (the worst
    case; 0, the default, lets early turns finish while later ones download).
Targets are printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.fakes.openai_server import FakeOpenAI, text  # noqa: E402
from tests.fakes.telegram_api import FakeTelegram  # noqa: E402
from tests.media.samples import jpeg_of_size  # noqa: E402

TOKEN: Final = "555555:bench-media-bot"
CONFIG: Final = """
[daemon]
state_dir = "./state"
log_level = "WARNING"

[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.seer]
provider = "fake"
model = "seer-model"
autonomy = "full"
vision = true

[agents.seer.media]
accept = ["image"]
max_bytes = 20000000
max_message_bytes = 20000000

[channels.tg]
kind = "telegram"
token = "env:TG_BENCH"
api_base_url = "{api}"
poll_timeout_s = 1

[[routes]]
channel = "tg"
agent = "seer"
senders = ["*"]
"""


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def replies(tg: FakeTelegram) -> int:
    return len(tg.calls("sendMessage"))


async def one_turn(tg: FakeTelegram, push: object) -> float:
    before = len(tg.calls("sendMessage"))
    started = time.perf_counter()
    push()  # type: ignore[operator]
    await tg.wait_for(lambda: len(tg.calls("sendMessage")) > before, timeout=60)
    return time.perf_counter() - started


async def main(turns: int, concurrent: int, size: int, latency_s: float) -> None:
    image = jpeg_of_size(size)
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegram(token=TOKEN) as tg, FakeOpenAI(default=text("seen")) as llm:
            config = Path(tmp) / "config.toml"
            config.write_text(CONFIG.format(base_url=llm.base_url, api=tg.api_base_url), encoding="utf-8")
            env = {**os.environ, "TG_BENCH": TOKEN}
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                cwd=_ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )
            try:
                await tg.wait_for(lambda: tg.calls("getUpdates"), timeout=60)
                # warm-up: first turns import and connect what later turns reuse
                chats = iter(range(2, 1000))
                for _ in range(3):
                    await one_turn(tg, lambda: tg.push_message(1, 1, "warm up"))
                    await one_turn(tg, lambda chat=next(chats): tg.push_photo(chat, chat, image))
                text_s, image_s = [], []
                for _ in range(turns):
                    text_s.append(await one_turn(tg, lambda: tg.push_message(1, 1, "hello there")))
                    image_s.append(await one_turn(tg, lambda chat=next(chats): tg.push_photo(chat, chat, image)))
                llm.latency_s = latency_s
                await asyncio.sleep(0.5)
                baseline = rss_bytes(proc.pid)
                peak = baseline
                before = len(tg.calls("sendMessage"))
                llm.requests.clear()
                for chat in range(concurrent):
                    tg.push_photo(1000 + chat, 1000 + chat, image)
                started = time.perf_counter()
                while len(tg.calls("sendMessage")) < before + concurrent:
                    peak = max(peak, rss_bytes(proc.pid))
                    await asyncio.sleep(0.005)
                    if time.perf_counter() - started > 300:
                        raise TimeoutError("the burst did not finish in 300 s")
                burst_s = time.perf_counter() - started
                after = rss_bytes(proc.pid)
            finally:
                proc.terminate()
                await proc.wait()
    print(f"media bench: {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, image {size:,} bytes, {turns} turns each, burst model latency {latency_s:g} s")
    t50, i50 = statistics.median(text_s) * 1000, statistics.median(image_s) * 1000
    print(f"  text turn   p50 {t50:7.1f} ms  p95 {pct(text_s, 0.95) * 1000:7.1f} ms")
    print(f"  image turn  p50 {i50:7.1f} ms  p95 {pct(image_s, 0.95) * 1000:7.1f} ms")
    print(f"  added by the image: p50 {i50 - t50:+.1f} ms ({i50 / t50:.2f}x a text turn)")
    total = size * concurrent
    held = peak - baseline
    print(f"  {concurrent} image turns at once: {burst_s:.2f} s; RSS baseline {baseline / 1e6:.1f} MB, "
          f"peak {peak / 1e6:.1f} MB, after {after / 1e6:.1f} MB")
    print(f"  held at peak: {held / 1e6:.1f} MB for {total / 1e6:.1f} MB of attachments = {held / total:.2f}x "
          f"(target <= ~2x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=2, concurrent=3, size=20_000)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.concurrent, args.size, args.latency))
