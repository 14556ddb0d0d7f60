"""Shared pieces of the daemon-with-a-platform tests: a running daemon and an echoing model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, start_channels
from tests.fakes.openai_server import Reply, text


def echo_model(request: dict[str, Any]) -> Reply:
    """Answer '<model>: <last user text>' so each reply names the agent and the question."""
    last = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return text(f"{request['model']}: {last}")


@asynccontextmanager
async def daemon(path: Path) -> AsyncIterator[Runtime]:
    """Run a Runtime on the config with every channel started and ready."""
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        await start_channels(runtime, ready_timeout_s=10)
        await asyncio.wait_for(runtime.mcp_settled.wait(), 30)  # the daemon serves meanwhile; tests wait
        assert all(s.ready for s in runtime.channels.status().values())
        yield runtime
