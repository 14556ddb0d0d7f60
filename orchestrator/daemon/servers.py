"""Connecting the MCP servers a config generation's agents (and SOP steps) reach, while the daemon serves."""

from __future__ import annotations

import asyncio

from loguru import logger

from orchestrator.config import Config
from orchestrator.seam import ConstructionPath, Services, connect_reach, service_reach

__all__ = ["connect_servers"]


async def connect_servers(config: Config, services: Services, *, shown: str, settled: asyncio.Event) -> None:
    """Connect every MCP server the agents (and SOP steps) of `config` reach; log failures.

    A server that does not come up keeps retrying in the background; until it does, the
    agents using it simply have none of its tools (never another agent's). `settled` is
    set once each server connected or failed its first attempt.
    """
    pool = services.mcp
    if pool is None:
        settled.set()
        return
    reach = service_reach(config, sorted(config.agents), ConstructionPath.CHANNEL, sops=sorted(config.sops))
    try:
        await connect_reach(pool, config, reach, require=False)
        _warn_bundle_problems(config, services, shown=shown)
    finally:
        settled.set()


def _warn_bundle_problems(config: Config, services: Services, *, shown: str) -> None:
    """Log each bundle tool name no connected server offers."""
    pool = services.mcp
    if pool is None:
        return
    from orchestrator.mcp import bundle_problems  # the MCP SDK only for a daemon with servers

    offers = {name: pool.offer(name, None) for name in config.mcp.servers}
    for problem in bundle_problems(config, offers, shown=shown):
        logger.warning("{}", problem)
