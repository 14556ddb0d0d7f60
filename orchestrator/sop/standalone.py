"""run_sop_standalone(): an SOP outside the daemon (`orchestrator sop`), opening what its steps need."""

from __future__ import annotations

from contextlib import AsyncExitStack

from orchestrator.config import Config
from orchestrator.policy import Approver, Interactivity
from orchestrator.seam import ConstructionPath, Services, mcp_servers_for, uses_memory
from orchestrator.sop.runner import SopResult, run_sop, sop_agents

__all__ = ["run_sop_standalone"]


async def run_sop_standalone(
    config: Config,
    name: str,
    *,
    context: str = "",
    approver: Approver | None = None,
    interactivity: Interactivity = Interactivity.NON_INTERACTIVE,
    actor: str | None = None,
) -> SopResult:
    """Open the audit log, memory store, MCP servers and serial pool the steps need; run; close.

    What each step agent reaches is asked of the seam (`mcp_servers_for`, `uses_memory` on
    the SOP_STEP path); raises UnknownSop before opening anything.
    """
    from orchestrator.mcp import McpPool
    from orchestrator.memory import MemoryStore
    from orchestrator.peripherals import PeripheralPool
    from orchestrator.store import AuditLog

    agents = sop_agents(config, name)
    state = config.state_path()
    async with AsyncExitStack() as stack:
        audit = stack.enter_context(AuditLog(state / "audit.sqlite3"))
        memory = None
        if any(uses_memory(config, a, path=ConstructionPath.SOP_STEP) for a in agents):
            memory = stack.enter_context(MemoryStore(state / "memory.sqlite3"))
        pool = await stack.enter_async_context(McpPool(config))
        for agent in agents:
            await pool.ensure_connected(mcp_servers_for(config, agent, path=ConstructionPath.SOP_STEP), agent=agent)
        # Ports open on the first peripheral tool call of a step, and close on exit.
        peripherals = await stack.enter_async_context(PeripheralPool())
        services = Services(audit=audit, mcp=pool, memory=memory, peripherals=peripherals)
        stack.push_async_callback(services.providers.aclose)
        return await run_sop(
            config, name, services=services, approver=approver, interactivity=interactivity,
            context=context, actor=actor,
        )
