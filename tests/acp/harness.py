"""Drive `orchestrator acp` as a real subprocess with the package's client-side connection."""

from __future__ import annotations

import asyncio
import os
import sys
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
        yield conn, process


def prompt(text: str) -> list[Any]:
    return [text_block(text)]


async def initialize(conn: ClientSideConnection) -> Any:
    return await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 20)
