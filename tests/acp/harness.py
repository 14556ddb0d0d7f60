"""Drive `orchestrator acp` as a real subprocess with the package's client-side connection."""

from __future__ import annotations

import asyncio
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

ROOT = Path(__file__).resolve().parents[2]
# How much CPU time the child may spend before it answers `initialize`. Its start is mostly
# imports, `acp.schema` above all (about 270 pydantic models built at import: some 1.5 s of
# CPU in all on this machine); under load that wall time stretches without bound (two cores
# shared with other suites, some of them real-time), so the wait is bounded by the child's own
# work, not by the clock. A child that hangs without working is caught by the test's timeout.
_INITIALIZE_CPU_S = 20.0
_processes: weakref.WeakKeyDictionary[ClientSideConnection, asyncio.subprocess.Process] = weakref.WeakKeyDictionary()

# What the test client answers to a permission request: an option id, or None to hold it
# until the prompt is cancelled (then it answers "cancelled", as the protocol asks).
Answer = Callable[[ToolCallUpdate, list[PermissionOption]], str | None]


@dataclass
class RecordingClient:
    """The editor side: records every session update and permission request."""

    answer: Answer = lambda call, options: "allow"
    updates: list[Any] = field(default_factory=list)
    permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(default_factory=list)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        self.asked.set()
        choice = self.answer(tool_call, options)
        if choice is None:
            await self.cancelled.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=choice))

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def reply(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


@asynccontextmanager
async def acp_agent(
    config: Path, agent: str, client: RecordingClient, *extra: str
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """Spawn `python -m orchestrator.cli acp --agent AGENT --config CONFIG` and initialize it."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "ORCHESTRATOR", "LC_", "LANG"))}
    async with spawn_agent_process(
        client, sys.executable, "-m", "orchestrator.cli", "acp", "--agent", agent, "--config", str(config), *extra,
        env=env, cwd=ROOT,
    ) as (conn, process):
        _processes[conn] = process
        yield conn, process


def prompt(text: str) -> list[Any]:
    return [text_block(text)]


async def initialize(conn: ClientSideConnection) -> Any:
    """Send `initialize` and return the answer; fail once the child spent `_INITIALIZE_CPU_S`
    of CPU without answering (a child that exits fails the request itself)."""
    answer = asyncio.ensure_future(conn.initialize(protocol_version=PROTOCOL_VERSION))
    process = _processes.get(conn)
    try:
        while not answer.done():
            await asyncio.wait([answer], timeout=0.5)
            if not answer.done() and process is not None and _cpu_s(process.pid) > _INITIALIZE_CPU_S:
                raise AssertionError(f"the ACP agent spent {_INITIALIZE_CPU_S:g}s of CPU without answering initialize")
    finally:
        answer.cancel()
    return answer.result()


def _cpu_s(pid: int) -> float:
    """Return the user and system CPU seconds process `pid` used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
