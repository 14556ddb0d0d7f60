"""The one resolve seam: every construction path turns agent policy into an execution here."""

from orchestrator.seam.approval import ApprovalManager
from orchestrator.seam.chat_commands import (
    APPROVAL_COMMANDS,
    COMPACT_COMMAND,
    SESSION_COMMANDS,
    SOP_COMMAND,
    WHOAMI_COMMAND,
    ChatCommands,
    resolve_chat_commands,
)
from orchestrator.seam.delegation import delegation_reach
from orchestrator.seam.group_gate import GateReason, GroupGate, group_gate_deprecations, resolve_group_gate
from orchestrator.seam.execution import (
    AgentIdentity,
    ContextPolicy,
    MemoryScope,
    ResolvedAgentExecution,
    RuntimeKnobs,
)
from orchestrator.seam.ledger import ActionLedger
from orchestrator.seam.matrix import agent_matrix
from orchestrator.seam.opening import ReachedTurn, connect_reach, open_services, service_reach
from orchestrator.seam.path_builders import (
    DEFAULT_BUILDERS,
    build_acp,
    build_channel,
    build_cli_run,
    build_delegate,
    build_gateway_chat,
    build_library,
    build_listing,
    build_on_path,
    build_schedule,
    build_sop_step,
)
from orchestrator.seam.paths import PATH_PROFILES, ConstructionPath, PathProfile, ScopedAssembly
from orchestrator.seam.assembly import assemble
from orchestrator.seam.registry import PromptSection, ScopedToolRegistry, TurnContext
from orchestrator.seam.resolve import InteractivityNotAllowed, mcp_servers_for, media_as_written, resolve, uses_memory
from orchestrator.seam.sandbox import SandboxHost, SandboxNotice, default_workspace, sandbox_notices, shell_sandbox
from orchestrator.seam.services import Services
from orchestrator.seam.usage import DAY_S, DayBudget, UsageMeter, UsageWatcher, budget_key, day_budgets
from orchestrator.seam.turn_scope import ChildRunner, CurrentTurn, current_turn, enter_turn, leave_turn

__all__ = [
    "DAY_S",
    "APPROVAL_COMMANDS",
    "COMPACT_COMMAND",
    "DEFAULT_BUILDERS",
    "PATH_PROFILES",
    "SESSION_COMMANDS",
    "SOP_COMMAND",
    "WHOAMI_COMMAND",
    "ActionLedger",
    "AgentIdentity",
    "ApprovalManager",
    "ChatCommands",
    "ChildRunner",
    "ConstructionPath",
    "ContextPolicy",
    "CurrentTurn",
    "DayBudget",
    "GateReason",
    "GroupGate",
    "InteractivityNotAllowed",
    "MemoryScope",
    "PathProfile",
    "PromptSection",
    "ReachedTurn",
    "ResolvedAgentExecution",
    "SandboxHost",
    "SandboxNotice",
    "RuntimeKnobs",
    "ScopedAssembly",
    "ScopedToolRegistry",
    "Services",
    "TurnContext",
    "UsageMeter",
    "UsageWatcher",
    "agent_matrix",
    "assemble",
    "budget_key",
    "day_budgets",
    "build_acp",
    "build_channel",
    "build_cli_run",
    "build_delegate",
    "build_gateway_chat",
    "build_library",
    "build_listing",
    "build_on_path",
    "build_schedule",
    "build_sop_step",
    "connect_reach",
    "current_turn",
    "default_workspace",
    "delegation_reach",
    "enter_turn",
    "group_gate_deprecations",
    "leave_turn",
    "mcp_servers_for",
    "media_as_written",
    "open_services",
    "resolve",
    "resolve_chat_commands",
    "resolve_group_gate",
    "sandbox_notices",
    "service_reach",
    "shell_sandbox",
    "uses_memory",
]
