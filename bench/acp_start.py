"""Measure `orchestrator acp` time-to-initialize-response beside its import floor.

Run from the repository root::

    .venv/bin/python bench/acp_start.py [--runs N]

Each run spawns a real `python -m orchestrator.cli acp --agent dev` subprocess on a config
whose agent has memory and an MCP bundle (both withheld on the fast path, so neither is
opened), sends `initialize` with the `agent-client-protocol` client and stops the clock at
the response. The floor is a bare `python -c "import acp, orchestrator.config"` (spawn to
exit): the protocol package and the config models every start needs. Bytecode is cached in
a temporary PYTHONPYCACHEPREFIX (this environment may set PYTHONDONTWRITEBYTECODE). Runs
alternate after one untimed warm-up of each; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from acp import PROTOCOL_VERSION, spawn_agent_process

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"

[mcp.servers.kit]
transport = "stdio"
command = "{python}"
args = ["-m", "tests.fakes.mcp_servers.kit"]

[mcp.bundles.kitb]
servers = ["kit"]
tools = {{ kit = ["echo"] }}

[agents.dev]
provider = "local"
model = "m"
tools = ["file_read", "shell"]
mcp_bundles = ["kitb"]

[agents.dev.memory]
scope = "agent"
"""


class _Quiet:
    async def session_update(self, **kwargs: object) -> None:
        return None


async def time_to_initialize(config: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    async with spawn_agent_process(
        _Quiet(), sys.executable, "-m", "orchestrator.cli", "acp", "--agent", "dev", "--config", str(config),
        env=env, cwd=ROOT,
    ) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        return time.perf_counter() - start


async def floor(env: dict[str, str]) -> float:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import acp, orchestrator.config", env={**os.environ, **env}, cwd=ROOT
    )
    await process.wait()
    return time.perf_counter() - start


async def main(runs: int, *, quick: bool = False) -> None:
    """Time `runs` of each after a warm-up; `quick` skips the warm-up and the fresh bytecode cache."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(CONFIG.format(python=sys.executable), encoding="utf-8")
        env = {} if quick else {"PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
        if not quick:
            await time_to_initialize(config, env)
            await floor(env)
        starts, floors = [], []
        for _ in range(runs):
            starts.append(await time_to_initialize(config, env))
            floors.append(await floor(env))
    for name, values in (("acp initialize", starts), ("import floor", floors)):
        values.sort()
        p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
        print(f"{name:<15} median {statistics.median(values) * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms")
    print(f"ratio to floor: {statistics.median(starts) / statistics.median(floors):.2f}x (target: < 1.5x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=1)
    args = parser.parse_args()
    asyncio.run(main(args.runs, quick=args.quick))
