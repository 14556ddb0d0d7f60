"""open_services(): the one way an entry point opens what its turns need.

Every entry point (the daemon, `orchestrator agent|tools|policy|sop`, the library, ACP,
and `orchestrator policy matrix`) names the agents it starts turns for, its construction
path and the SOPs it may run; the seam works out every (agent, path) those turns can
resolve (each agent on the path, every agent they can delegate to, transitively, on the
delegate path, every SOP step agent on the SOP step path) and opens exactly what those
need. So a `delegate` target gets the same memory store and MCP servers whichever entry
point the delegating turn started from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from orchestrator.seam.delegation import delegation_reach
from orchestrator.seam.paths import ConstructionPath
from orchestrator.seam.resolve import mcp_servers_for, uses_memory
from orchestrator.seam.services import Services

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.mcp import McpPool

__all__ = ["ReachedTurn", "connect_reach", "open_services", "service_reach"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReachedTurn:
    """One (agent, path) an entry point's turns can resolve; `required` = started by the entry point."""

    agent: str
    path: ConstructionPath
    required: bool


def service_reach(
    config: Config, agents: Iterable[str], path: ConstructionPath, *, sops: Iterable[str] = ()
) -> tuple[ReachedTurn, ...]:
    """Return every (agent, path) turns started for `agents` on `path` (and `sops`' steps) resolve.

    The named agents and the SOP step agents are `required`; the agents they can delegate
    to (transitively, within the depth limit) are reached on the delegate path. An unknown
    agent needs nothing and an unknown SOP adds no step (`resolve()` and the SOP runner
    report them).
    """
    reached: dict[tuple[str, ConstructionPath], bool] = {}
    starts = [(name, path) for name in agents]
    for sop_name in sops:
        sop = config.sops.get(sop_name)
        if sop is not None:
            starts += [(step.agent or sop.agent, ConstructionPath.SOP_STEP) for step in sop.steps]
    for name, start_path in starts:
        reached[(name, start_path)] = True
    for name, _ in starts:
        targets = delegation_reach(config, name)
        # A target that can delegate back makes `name` a delegate target too (on another path).
        again = (name,) if any(name in delegation_reach(config, t) for t in targets) else ()
        for target in (*targets, *again):
            reached.setdefault((target, ConstructionPath.DELEGATE), False)
    return tuple(ReachedTurn(agent=a, path=p, required=r) for (a, p), r in reached.items())


async def connect_reach(
    pool: McpPool, config: Config, reach: Iterable[ReachedTurn], *, require: bool = True
) -> None:
    """Connect the MCP servers each reached turn's bundles need, concurrently.

    A server that does not come up keeps retrying in the background; until it does, the
    agents using it have none of its tools (never another agent's). With `require`, a
    failure for a required turn raises `McpServerUnavailable` (naming every such server)
    after every connection was tried; every other failure is logged.
    """
    from orchestrator.mcp import McpServerUnavailable

    wanted: dict[tuple[str, tuple[str, ...]], bool] = {}
    for turn in reach:
        servers = mcp_servers_for(config, turn.agent, path=turn.path)
        if servers:
            key = (turn.agent, servers)
            wanted[key] = wanted.get(key, False) or (require and turn.required)

    async def connect(agent: str, servers: tuple[str, ...], strict: bool) -> list[tuple[str, str]]:
        try:
            await pool.ensure_connected(servers, agent=agent)
        except McpServerUnavailable as exc:
            if strict:
                return list(exc.failures)
            logger.error("agent {}: {}", agent, exc)
        return []

    results = await asyncio.gather(*(connect(a, s, strict) for (a, s), strict in wanted.items()))
    failures = list(dict.fromkeys(f for found in results for f in found))
    if failures:
        raise McpServerUnavailable(failures)


@asynccontextmanager
async def open_services(
    config: Config,
    agents: Iterable[str],
    path: ConstructionPath,
    *,
    sops: Iterable[str] = (),
    state_dir: Path | None = None,
    connect_mcp: bool = True,
    require_mcp: bool = True,
    connect_peripherals: bool = True,
    reloadable: bool = False,
    connect_now: bool = True,
) -> AsyncIterator[Services]:
    """Open the audit log, usage log, memory store, MCP servers and peripheral pool the reached turns need.

    What is reached is `service_reach(config, agents, path, sops=sops)`. The memory store
    opens only when a reached turn has memory, the MCP pool only when one has bundles
    (its servers connected before this yields). Parameters only ever withhold:

    - `state_dir`: where the audit log and memory store live (default: the config's state
      directory; `policy matrix` passes a throwaway one).
    - `connect_mcp=False`: no MCP pool at all (no server is started; no MCP tools).
    - `require_mcp=False`: a server that does not come up for a named agent is logged,
      not raised (the daemon keeps serving while it retries).
    - `connect_peripherals=False`: the pool is never entered, so no port can open (listings).
    - `reloadable`: the config may be swapped under these services (the daemon): the memory
      store and the MCP pool open even before any agent needs them.
    - `connect_now=False`: the MCP pool opens but no server is connected yet; the caller
      connects them (`connect_reach`) while it serves (the daemon: a slow server never
      delays its channels).

    Raises `StateError` when the state directory is unusable and `McpServerUnavailable`
    (with `require_mcp`) when a named agent's server does not connect; whatever was opened
    by then is closed. On exit everything closes in reverse order.
    """
    from orchestrator.peripherals import PeripheralPool
    from orchestrator.seam.usage import UsageMeter
    from orchestrator.store import AuditLog, UsageLog

    reach = service_reach(config, agents, path, sops=sops)
    state = state_dir if state_dir is not None else config.state_path()
    async with AsyncExitStack() as stack:
        audit = stack.enter_context(AuditLog(state / "audit.sqlite3"))
        usage = UsageMeter(log=stack.enter_context(UsageLog(state / "usage.sqlite3")))
        memory = None
        if reloadable or any(uses_memory(config, t.agent, path=t.path) for t in reach):
            from orchestrator.memory import MemoryStore

            memory = stack.enter_context(MemoryStore(state / "memory.sqlite3"))
        peripherals = PeripheralPool()
        if connect_peripherals:  # entering opens no port: each opens on its first tool call
            await stack.enter_async_context(peripherals)
        pool = None
        needs_mcp = any(mcp_servers_for(config, t.agent, path=t.path) for t in reach)
        if connect_mcp and (needs_mcp or (reloadable and config.mcp.servers)):
            from orchestrator.mcp import McpPool

            pool = await stack.enter_async_context(McpPool(config))
            if connect_now:
                await connect_reach(pool, config, reach, require=require_mcp)
        services = Services(audit=audit, usage=usage, mcp=pool, memory=memory, peripherals=peripherals)
        stack.push_async_callback(services.providers.aclose)
        yield services
