"""Compare the gateway's two upload forms: base64 in JSON and `multipart/form-data`.

Run from the repository root::

    .venv/bin/python bench/gateway_uploads.py [--turns N] [--concurrent C] [--size BYTES]

The daemon is a real `python -m orchestrator.cli run` subprocess with a `[gateway]` on
127.0.0.1, its agent on FakeOpenAI (zero latency) served by this process, so the daemon's
RSS holds only what the daemon holds. The file is a SIZE-byte text document (default 5 MB),
so the model request carries a path, not the bytes: what is measured is the upload path
(body read, base64 decode or streamed parts, the intake's move into `uploads/`).

(a) Latency: N turns of each form, alternated; a turn is request sent to response read.
    Reported: p50/p95 of each.
(b) Memory: C uploads of each form at once (default 20); the daemon's VmRSS is sampled from
    /proc every 5 ms. Reported: the peak over the settled baseline beside the uploads' total
    size. JSON holds each body, its parse and the decoded bytes; multipart streams each part
    to disk in 64 KiB chunks, so it should hold a small fraction of the total.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import aiohttp

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.fakes.openai_server import FakeOpenAI, text  # noqa: E402

CONFIG: Final = """
[daemon]
state_dir = "./state"
log_level = "WARNING"

[providers.fake]
base_url = "{base_url}"
max_retries = 0

[gateway]
port = {port}
max_body_bytes = 67108864

[agents.ops]
provider = "fake"
model = "ops-model"
autonomy = "full"

[agents.ops.media]
accept = ["document"]
max_bytes = 60000000
max_message_bytes = 60000000
"""


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def send_json(session: aiohttp.ClientSession, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        assert response.status == 200, await response.text()
        await response.read()
    return time.perf_counter() - started


async def send_form(session: aiohttp.ClientSession, url: str, data: bytes) -> float:
    form = aiohttp.FormData()
    form.add_field("text", "store this")
    form.add_field("document", data, filename="notes.txt", content_type="text/plain")
    started = time.perf_counter()
    async with session.post(url, data=form) as response:
        assert response.status == 200, await response.text()
        await response.read()
    return time.perf_counter() - started


async def burst(proc: asyncio.subprocess.Process, sends: list[asyncio.Future[float]]) -> tuple[int, int, float]:
    """Run the sends at once; return (baseline RSS, peak RSS, seconds)."""
    await asyncio.sleep(0.5)
    baseline = peak = rss_bytes(proc.pid)
    started = time.perf_counter()
    gathered = asyncio.gather(*sends)
    while not gathered.done():
        peak = max(peak, rss_bytes(proc.pid))
        await asyncio.sleep(0.005)
    await gathered
    return baseline, peak, time.perf_counter() - started


async def main(turns: int, concurrent: int, size: int) -> None:
    data = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    body = b'{"text": "store this", "attachments": [{"kind": "document", "mime": "text/plain", "name": "notes.txt", "data": "' \
        + base64.b64encode(data) + b'"}]}'
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/agents/ops/messages"
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeOpenAI(default=text("stored")) as llm:
            config = Path(tmp) / "config.toml"
            config.write_text(CONFIG.format(base_url=llm.base_url, port=port), encoding="utf-8")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                cwd=_ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
                    for _ in range(100):  # until the gateway listens
                        try:
                            async with session.get(f"http://127.0.0.1:{port}/health"):
                                break
                        except aiohttp.ClientConnectionError:
                            await asyncio.sleep(0.1)
                    for _ in range(3):  # warm-up
                        await send_json(session, url, body)
                        await send_form(session, url, data)
                    json_s, form_s = [], []
                    for _ in range(turns):
                        json_s.append(await send_json(session, url, body))
                        form_s.append(await send_form(session, url, data))
                    json_burst = await burst(proc, [asyncio.ensure_future(send_json(session, url, body))
                                                    for _ in range(concurrent)])
                    form_burst = await burst(proc, [asyncio.ensure_future(send_form(session, url, data))
                                                    for _ in range(concurrent)])
            finally:
                proc.terminate()
                await proc.wait()
    print(f"gateway uploads bench: {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, file {size:,} bytes, {turns} turns each")
    for label, times in (("json+base64", json_s), ("multipart  ", form_s)):
        print(f"  {label} p50 {statistics.median(times) * 1000:7.1f} ms  p95 {pct(times, 0.95) * 1000:7.1f} ms")
    total = size * concurrent
    for label, (baseline, peak, seconds) in (("json+base64", json_burst), ("multipart  ", form_burst)):
        held = peak - baseline
        print(f"  {label} {concurrent} at once: {seconds:.2f} s; RSS baseline {baseline / 1e6:.1f} MB, "
              f"peak {peak / 1e6:.1f} MB; held {held / 1e6:.1f} MB for {total / 1e6:.1f} MB = {held / total:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--size", type=int, default=5_000_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=2, concurrent=2, size=50_000)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.concurrent, args.size))
