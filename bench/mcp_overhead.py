"""Measure what the MCP pool adds to a tool call, and prove no server is spawned per turn.

Run from the repository root::

    .venv/bin/python bench/mcp_overhead.py [--calls N] [--turns M]

(a) Round trip of one `echo` call to the stdio `kit` test server: through the pool (the
    registry's McpTool -> McpPool -> the owning connection, result rendered to text)
    beside a raw `mcp.Client` call to its own copy of the same server. Calls alternate
    between the two so drift hits both alike. Target: pooled median within 1.2x of raw.
(b) M turns of `resolve()` + `run_tool_call_loop` with an in-process scripted provider;
    each turn calls a tool on each of two servers. The servers append their pid to a
    file when they start. Target: exactly one process per server over all the turns.

Figures are printed beside the targets, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.config import Config  # noqa: E402
from orchestrator.engine import StopReason, Transcript, run_tool_call_loop  # noqa: E402
from orchestrator.mcp import McpPool  # noqa: E402
from orchestrator.providers import ProviderPool, ToolCall  # noqa: E402
from orchestrator.seam import ConstructionPath, Services, mcp_servers_for, resolve  # noqa: E402
from bench.fake_provider import FakeProvider, calls_then_text  # noqa: E402

AGENT: Final = "bench"
SERVERS: Final = ("kit", "kit2")
KIT: Final = ["-m", "tests.fakes.mcp_servers.kit"]


def write_config(folder: Path) -> Path:
    lines = [
        '[daemon]\nstate_dir = "state"\n',
        '[providers.inproc]\nbase_url = "http://127.0.0.1:9/v1"\n',
    ]
    for server in SERVERS:
        args = [*KIT, "--spawn-log", str(folder / f"{server}.spawns")]
        lines.append(
            f'[mcp.servers.{server}]\ntransport = "stdio"\ncommand = {json.dumps(sys.executable)}\n'
            f"args = {json.dumps(args)}\ncwd = {json.dumps(str(_ROOT))}\n"
        )
    lines.append(
        '[mcp.bundles.both]\nservers = ["kit", "kit2"]\ntools = { kit = ["echo"], kit2 = ["echo"] }\n'
        f'[agents.{AGENT}]\nprovider = "inproc"\nmodel = "m"\nautonomy = "full"\nmcp_bundles = ["both"]\n'
        f"[agents.{AGENT}.budget]\nmax_actions_per_hour = 1000000\n"
    )
    path = folder / "config.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


PROVIDER: Final = FakeProvider(calls_then_text(  # one echo per server, then answer
    [ToolCall(id=f"c{i}", name=f"{server}__echo", arguments='{"text": "ping"}') for i, server in enumerate(SERVERS)],
    "done",
))


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


async def round_trips(config: Config, calls: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=KIT, cwd=str(_ROOT))
    async with McpPool(config) as pool, Client(params, cache=None) as raw:
        await pool.ensure_connected(mcp_servers_for(config, AGENT), agent=AGENT)
        services = Services(mcp=pool, providers=ProviderPool(factory=PROVIDER.factory))
        tool = resolve(config, AGENT, path=ConstructionPath.CLI_RUN, services=services).tools.get("kit__echo")
        assert tool is not None
        for _ in range(50):  # warm both paths
            await tool.invoke({"text": "ping"})
            await raw.call_tool("echo", {"text": "ping"})
        pooled_s: list[float] = []
        raw_s: list[float] = []
        gc.collect()
        for _ in range(calls):
            start = time.perf_counter()
            await tool.invoke({"text": "ping"})
            pooled_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            await raw.call_tool("echo", {"text": "ping"})
            raw_s.append(time.perf_counter() - start)
    p_med, p_95 = percentiles(pooled_s)
    r_med, r_95 = percentiles(raw_s)
    print(f"(a) tool-call round trip to the stdio kit server, {calls} calls each")
    print(f"    raw mcp.Client    median {r_med * 1e3:7.3f} ms   p95 {r_95 * 1e3:7.3f} ms")
    print(f"    pooled (McpTool)  median {p_med * 1e3:7.3f} ms   p95 {p_95 * 1e3:7.3f} ms")
    print(f"    ratio pooled/raw  median {p_med / r_med:5.2f}x      p95 {p_95 / r_95:5.2f}x   (target <= 1.20x)")


async def spawns_over_turns(config: Config, folder: Path, turns: int) -> None:
    async with McpPool(config) as pool:
        await pool.ensure_connected(mcp_servers_for(config, AGENT), agent=AGENT)
        services = Services(mcp=pool, providers=ProviderPool(factory=PROVIDER.factory))
        start = time.perf_counter()
        for i in range(turns):
            execution = resolve(config, AGENT, path=ConstructionPath.CLI_RUN, services=services)
            result = await run_tool_call_loop(execution, Transcript(session=f"t{i}"), "go")
            if result.stop is not StopReason.COMPLETED or len(result.executed) != len(SERVERS):
                raise SystemExit(f"turn {i} did not complete: {result}")
        elapsed = time.perf_counter() - start
    print(f"(b) {turns} turns of resolve() + run_tool_call_loop, one call to each of {len(SERVERS)} servers")
    print(f"    per turn {elapsed / turns * 1e3:.3f} ms")
    for server in SERVERS:
        pids = (folder / f"{server}.spawns").read_text().split()
        print(f"    server {server}: {len(pids)} process(es) spawned   (target: exactly 1)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="round trips per side for (a)")
    parser.add_argument("--turns", type=int, default=500, help="turns for (b)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(calls=10, turns=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as tmp:
        folder = Path(tmp)
        config = load_config(write_config(folder))
        await round_trips(config, args.calls)
        for server in SERVERS:
            (folder / f"{server}.spawns").unlink(missing_ok=True)
        await spawns_over_turns(config, folder, args.turns)


if __name__ == "__main__":
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    asyncio.run(main())
