"""`orchestrator check --connect`: everything `check` cannot see without the network, and `ok` last."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TextIO

from orchestrator.checks import route_problems, telemetry_problems, tool_name_problems
from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.doctor.channels import probe_channel
from orchestrator.doctor.providers import probe_provider, providers_in_use
from orchestrator.doctor.secrets import secret_problems
from orchestrator.mcp import probe_mcp

__all__ = ["run_doctor"]


async def run_doctor(
    config: Config,
    *,
    shown: str,
    out: TextIO,
    err: TextIO,
    ok_line: str,
    timeout_s: float = 10.0,
    mcp_timeout_s: float = 30.0,
    local: Sequence[ConfigProblem] = (),
) -> int:
    """Probe every secret, MCP server, provider and channel once; print `ok_line` last if all passed.

    What connected is printed to `out` as it is found; warnings, then problems, go to `err`
    one line each, `local` (what `check` found without the network) last. Returns the exit
    code: 0 only when there was no problem.
    """
    problems = [*telemetry_problems(config, shown=shown), *secret_problems(config, shown=shown)]
    mcp = await probe_mcp(config, shown=shown, out=out, connect_timeout_s=mcp_timeout_s)
    problems.extend(mcp.problems)
    async with asyncio.TaskGroup() as group:
        provider_tasks = [
            group.create_task(probe_provider(p, shown=shown, timeout_s=timeout_s))
            for p in providers_in_use(config)
        ]
        channel_tasks = [
            group.create_task(probe_channel(config, name, channel, shown=shown, timeout_s=timeout_s))
            for name, channel in config.channels.items()
        ]
    for task in (*provider_tasks, *channel_tasks):
        line, found = task.result()
        if line is not None:
            print(line, file=out)
        problems.extend(found)
    problems.extend(route_problems(config, shown=shown))
    offered = {
        server: frozenset(t.name for t in offer.tools) if offer else None for server, offer in mcp.offers.items()
    }
    problems.extend(tool_name_problems(config, offered, shown=shown))
    problems.extend(local)
    problems = list(dict.fromkeys(problems))  # `local` repeats what a probe found first (a token's shape)
    for warning in mcp.warnings:
        print(f"warning: {warning}", file=err)
    for problem in problems:
        print(problem, file=err)
    if problems:
        return 1
    print(ok_line, file=out)
    return 0
