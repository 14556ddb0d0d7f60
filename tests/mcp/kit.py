"""MCP test kit: config snippets for the `kit` server (stdio and HTTP), a running pool, turns.

Fixtures live in tests/mcp/conftest.py; other test packages import these helpers from here."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from orchestrator.config import Config
from orchestrator.engine import Transcript, TurnResult, run_tool_call_loop
from orchestrator.mcp import Backoff, McpPool
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, mcp_servers_for, resolve

ROOT = Path(__file__).resolve().parents[2]
KIT_MODULE = "tests.fakes.mcp_servers.kit"
FAST_BACKOFF = Backoff(base_s=0.05, cap_s=0.5)


def toml_list(values: list[str]) -> str:
    return json.dumps(values)


def stdio_kit(
    name: str = "kit",
    *,
    spawn_log: Path | None = None,
    tool_timeout_s: float = 15.0,
    isolation: str = "shared",
    env: dict[str, str] | None = None,
    linger: bool = False,
    junk: int = 0,
    slow_start_s: float = 0.0,
) -> str:
    """Return `[mcp.servers.NAME]` running the kit server as a stdio subprocess."""
    args = ["-m", KIT_MODULE, *(["--spawn-log", str(spawn_log)] if spawn_log else []), *(["--linger"] if linger else []),
            *(["--junk", str(junk)] if junk else []),
            *(["--slow-start", str(slow_start_s)] if slow_start_s else [])]
    lines = [
        f"[mcp.servers.{name}]",
        'transport = "stdio"',
        f"command = {json.dumps(sys.executable)}",
        f"args = {toml_list(args)}",
        f"cwd = {json.dumps(str(ROOT))}",
        f"tool_timeout_s = {tool_timeout_s}",
        f'isolation = "{isolation}"',
    ]
    if env:
        lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
    return "\n".join(lines) + "\n"


# The kit server, unless the gate file exists: then it exits at once (a server that cannot come back).
GATED_KIT = """\
import os, runpy, sys
gate, log = sys.argv[1], sys.argv[2]
if os.path.exists(gate):
    sys.exit(3)
sys.argv = ["kit", "--spawn-log", log]
runpy.run_module("tests.fakes.mcp_servers.kit", run_name="__main__", alter_sys=True)
"""


def gated_kit(name: str, *, gate: Path, spawn_log: Path, isolation: str = "shared") -> str:
    """Return `[mcp.servers.NAME]` for the stdio kit that refuses to start while `gate` exists.

    Each process it starts appends its pid to `spawn_log`; kill one and touch `gate`, and
    the server stays down (reconnecting) until the gate is removed.
    """
    args = toml_list(["-c", GATED_KIT, str(gate), str(spawn_log)])
    return (
        f'[mcp.servers.{name}]\ntransport = "stdio"\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n'
        f'cwd = {json.dumps(str(ROOT))}\nisolation = "{isolation}"\n'
    )


def http_kit(
    name: str, url: str, *, tool_timeout_s: float = 15.0, headers: dict[str, str] | None = None,
    ready_wait_s: float | None = None,
) -> str:
    """Return `[mcp.servers.NAME]` for a kit server on streamable HTTP."""
    text = f'[mcp.servers.{name}]\ntransport = "http"\nurl = "{url}"\ntool_timeout_s = {tool_timeout_s}\n'
    if ready_wait_s is not None:
        text += f"ready_wait_s = {ready_wait_s}\n"
    if headers:
        text += "headers = { " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in headers.items()) + " }\n"
    return text


def bundle(name: str, *, servers: dict[str, list[str]], mode: str = "eager",
           pinned: dict[str, list[str]] | None = None) -> str:
    """Return `[mcp.bundles.NAME]` granting the listed tools per server."""
    tools = ", ".join(f"{s} = {toml_list(t)}" for s, t in servers.items())
    text = (
        f"[mcp.bundles.{name}]\nservers = {toml_list(list(servers))}\ntools = {{ {tools} }}\n"
        f'mode = "{mode}"\n'
    )
    if pinned:
        text += "pinned_resources = { " + ", ".join(f"{s} = {toml_list(u)}" for s, u in pinned.items()) + " }\n"
    return text


def agent_toml(name: str, *, bundles: list[str], extra: str = "", autonomy: str = "full") -> str:
    """Return `[agents.NAME]` using the fake provider and the given bundles."""
    return (
        f'[agents.{name}]\nprovider = "fake"\nmodel = "m-{name}"\nautonomy = "{autonomy}"\n'
        f"mcp_bundles = {toml_list(bundles)}\n{extra}"
    )


@asynccontextmanager
async def mcp_services(config: Config, *agents: str) -> AsyncIterator[Services]:
    """Services whose pool has the servers each named agent's bundles need connected."""
    async with McpPool(config, backoff=FAST_BACKOFF, connect_timeout_s=20) as pool:
        for agent in agents:
            await pool.ensure_connected(mcp_servers_for(config, agent), agent=agent)
        services = Services(mcp=pool)
        try:
            yield services
        finally:
            await services.providers.aclose()


def pool_of(services: Services) -> McpPool:
    assert services.mcp is not None
    return services.mcp


def execution(config: Config, services: Services, agent: str,
              path: ConstructionPath = ConstructionPath.CLI_RUN) -> ResolvedAgentExecution:
    return resolve(config, agent, path=path, services=services)


async def turn(config: Config, services: Services, agent: str, message: str = "go") -> TurnResult:
    return await run_tool_call_loop(
        execution(config, services, agent), Transcript(session=f"s-{agent}"), message
    )


def mcp_names(names: Any) -> list[str]:
    return sorted(n for n in names if "__" in n)


def sent_tools(request: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools", []))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def server_counts(services: Services, server: str = "kit", agent: str | None = None) -> dict[str, int]:
    """Ask the server itself how often each tool ran (outside any agent's registry)."""
    pool = pool_of(services)
    counts: dict[str, int] = json.loads(await pool.call_tool(server, agent, "counts", {}, display="counts"))
    return counts


async def wait_for(predicate: Any, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HttpKit:
    """The kit server on streamable HTTP in a subprocess, restartable on the same port."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._log = log
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self._log, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", KIT_MODULE, "--http", str(self.port)],
                cwd=ROOT, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"kit HTTP server exited: {self._log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("kit HTTP server did not start listening")

    def wait_exited(self) -> None:
        assert self._proc is not None
        self._proc.wait(timeout=10)
        self._proc = None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
