"""Services: the long-lived objects `resolve()` binds executions to (opened by `open_services`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from orchestrator.providers import ProviderPool
from orchestrator.policy import AuditSink
from orchestrator.seam.ledger import ActionLedger
from orchestrator.seam.usage import UsageMeter

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.mcp import McpPool
    from orchestrator.memory import MemoryStore
    from orchestrator.peripherals import PeripheralPool
    from orchestrator.seam.execution import ResolvedAgentExecution

__all__ = ["Services"]


@dataclass(kw_only=True, eq=False)
class Services:
    """Provider clients, the audit sink, the action ledger, the usage meter and the MCP pool shared by every turn."""

    providers: ProviderPool = field(default_factory=ProviderPool)
    audit: AuditSink | None = None
    ledger: ActionLedger = field(default_factory=ActionLedger)
    # Token budgets and the usage table (`open_services` gives it the state dir's log).
    usage: UsageMeter = field(default_factory=UsageMeter)
    # The daemon's MCP connections; None grants no MCP tools (nothing is connected).
    mcp: McpPool | None = None
    # Every agent's memories; None grants no memory tools (no store is open).
    memory: MemoryStore | None = None
    # The daemon's serial ports (opened on first call); None grants no peripheral tools.
    peripherals: PeripheralPool | None = None
    # resolve() results per config generation; a new generation starts empty.
    cache: WeakKeyDictionary[Config, dict[tuple[object, ...], ResolvedAgentExecution]] = field(
        default_factory=WeakKeyDictionary
    )
