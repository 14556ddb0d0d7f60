"""Measure the Slack and Discord adapters' attachment downloads: latency and memory held.

Run from the repository root::

    .venv/bin/python bench/media_downloads.py [--runs N] [--concurrent N] [--mib N]

For each platform, through the real adapter (slack_sdk's session / aiohttp) against its
loopback fake: the time to download one image of `--mib` MiB to disk (percentiles over
`--runs`), beside one small Web API / REST call on the same connection as a floor; then
`--concurrent` downloads of that image at once while RSS is sampled every 2 ms, reporting the
peak growth over the baseline as a multiple of one attachment and of all of them. The fakes run in this process, so
the growth includes their send buffers too: an upper bound for the adapter. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/media_downloads.py`

from channels import Attachment, create_adapter
from channels.discord import DiscordAdapter
from channels.slack import SlackAdapter
from orchestrator.config.channels import DiscordChannelConfig, SlackChannelConfig
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack

Download = Callable[[Attachment, Path], Awaitable[int]]


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(call: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    await call()  # warm-up: connection made, TLS-free loopback
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return times


async def peak_growth(download: Download, attachment: Attachment, folder: Path, concurrent: int) -> int:
    baseline = rss_bytes()
    peak = baseline
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_bytes())
            await asyncio.sleep(0.002)

    async with asyncio.TaskGroup() as tasks:
        sampler = tasks.create_task(sample())
        async with asyncio.TaskGroup() as downloads:
            for index in range(concurrent):
                downloads.create_task(download(attachment, folder / f"c{index}"))
        done.set()
        await sampler
    return peak - baseline


async def save(adapter: SlackAdapter | DiscordAdapter, attachment: Attachment, dest: Path, *, max_bytes: int) -> int:
    """Download into a new file at `dest`: the adapters write to an open file, as the media intake hands them one."""
    with open(dest, "wb") as out:
        return await adapter.download(attachment, out, max_bytes=max_bytes)


def report(name: str, download_ms: list[float], floor_ms: list[float], growth: int, size: int, concurrent: int) -> None:
    print(
        f"{name:8s} download {size / 2**20:.0f} MiB: p50 {statistics.median(download_ms):6.2f} ms "
        f"p95 {percentile(download_ms, 0.95):6.2f} ms | small API call p50 {statistics.median(floor_ms):5.2f} ms | "
        f"{concurrent} at once: peak RSS +{growth / 2**20:5.1f} MiB = {growth / size:4.1f}x one attachment, "
        f"{growth / (size * concurrent):.2f}x all {concurrent}"
    )


async def bench_slack(content: bytes, runs: int, concurrent: int, folder: Path) -> None:
    async with FakeSlack() as fake:
        secrets = {"env:BOT": fake.bot_token}
        config = SlackChannelConfig.model_validate(
            {"kind": "slack", "bot_token": "env:BOT", "api_base_url": fake.api_base_url, "mode": "http"}
        )
        adapter = create_adapter("bench", config, secrets=lambda ref: secrets[ref])
        assert isinstance(adapter, SlackAdapter)
        obj = fake.files.add("photo.png", content, mimetype="image/png")
        attachment = Attachment(kind="image", mime="image/png", handle=obj["url_private"], size=len(content))
        async with adapter:
            async def one() -> int:
                return await save(adapter, attachment, folder / "one", max_bytes=len(content))

            async def download(att: Attachment, dest: Path) -> int:
                return await save(adapter, att, dest, max_bytes=len(content))

            client, _session = adapter._http()
            floor = await timed(lambda: client.auth_test(), runs)
            download_ms = await timed(one, runs)
            growth = await peak_growth(download, attachment, folder, concurrent)
    report("slack", download_ms, floor, growth, len(content), concurrent)


async def bench_discord(content: bytes, runs: int, concurrent: int, folder: Path) -> None:
    async with FakeDiscord(token="bench-token") as fake:
        config = DiscordChannelConfig.model_validate(
            {"kind": "discord", "token": "env:T", "api_base_url": fake.api_base_url}
        )
        adapter = create_adapter("bench", config, secrets=lambda ref: "bench-token")
        assert isinstance(adapter, DiscordAdapter)
        obj = fake.cdn.attachment(channel_id="1", filename="photo.png", content=content, content_type="image/png")
        attachment = Attachment(kind="image", mime="image/png", handle=obj["url"], size=len(content))
        try:
            async def one() -> int:
                return await save(adapter, attachment, folder / "one", max_bytes=len(content))

            async def download(att: Attachment, dest: Path) -> int:
                return await save(adapter, att, dest, max_bytes=len(content))

            async with aiohttp.ClientSession() as session:
                async def floor_call() -> None:
                    async with session.get(f"{fake.api_base_url}/users/@me", headers={"Authorization": "Bot bench-token"}) as r:
                        await r.read()

                floor = await timed(floor_call, runs)
            download_ms = await timed(one, runs)
            growth = await peak_growth(download, attachment, folder, concurrent)
        finally:
            await adapter.aclose()
    report("discord", download_ms, floor, growth, len(content), concurrent)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--mib", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=2, concurrent=2)
    args = parser.parse_args()
    content = bytes(range(256)) * (args.mib * 4096)
    with tempfile.TemporaryDirectory() as folder:
        await bench_slack(content, args.runs, args.concurrent, Path(folder))
        await bench_discord(content, args.runs, args.concurrent, Path(folder))
    print("(Discord opens one aiohttp session per download; Slack reuses the Web API session.)")


if __name__ == "__main__":
    asyncio.run(main())
