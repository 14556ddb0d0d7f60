"""ResolvedAgentExecution: everything the engine needs for one agent's turn, sealed."""

from __future__ import annotations

from dataclasses import InitVar, dataclass

from orchestrator.media import NO_MEDIA, MediaPolicy
from orchestrator.providers import ModelBinding, Provider
from orchestrator.errors import SealViolation
from orchestrator.policy import SecurityPolicy
from orchestrator.seam._seal import SEAL, sealed_class, vouch, vouched
from orchestrator.seam.approval import ApprovalManager
from orchestrator.seam.ledger import ActionLedger
from orchestrator.seam.paths import ConstructionPath, ScopedAssembly
from orchestrator.seam.registry import PromptSection, ScopedToolRegistry, TurnContext
from orchestrator.seam.usage import UsageMeter

__all__ = [
    "AgentIdentity",
    "ContextPolicy",
    "MemoryScope",
    "ModelBinding",
    "ResolvedAgentExecution",
    "RuntimeKnobs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentIdentity:
    """Who acts, on which path, and on whose behalf (parent correlation)."""

    agent: str
    path: ConstructionPath
    parent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeKnobs:
    """Resolved budgets; a ceiling (delegation) can only lower them."""

    max_tool_iterations: int
    turn_timeout_s: float
    tool_timeout_s: float
    max_tool_result_chars: int
    max_history_messages: int
    max_actions_per_hour: int
    max_tokens_per_turn: int
    max_tokens_per_day: int

    def capped_by(self, ceiling: RuntimeKnobs | None) -> RuntimeKnobs:
        """Return these knobs, each lowered to `ceiling`'s value where that is smaller."""
        if ceiling is None:
            return self
        return RuntimeKnobs(
            max_tool_iterations=min(self.max_tool_iterations, ceiling.max_tool_iterations),
            turn_timeout_s=min(self.turn_timeout_s, ceiling.turn_timeout_s),
            tool_timeout_s=min(self.tool_timeout_s, ceiling.tool_timeout_s),
            max_tool_result_chars=min(self.max_tool_result_chars, ceiling.max_tool_result_chars),
            max_history_messages=min(self.max_history_messages, ceiling.max_history_messages),
            max_actions_per_hour=min(self.max_actions_per_hour, ceiling.max_actions_per_hour),
            max_tokens_per_turn=min(self.max_tokens_per_turn, ceiling.max_tokens_per_turn),
            max_tokens_per_day=min(self.max_tokens_per_day, ceiling.max_tokens_per_day),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPolicy:
    """What one model request may hold, and who folds what no longer fits into a summary.

    `hold_messages` is how many messages a session keeps in memory between turns: the
    history window, with room for messages that left it but are not folded yet.
    """

    max_context_tokens: int
    strategy: str  # "window" | "summarize"
    keep_recent: int
    summary_model: ModelBinding
    summarizer: Provider
    summary_timeout_s: float
    hold_messages: int

    def describe(self) -> dict[str, object]:
        """Return the resolved values as plain data."""
        link = self.summary_model
        return {
            "max_context_tokens": self.max_context_tokens,
            "strategy": self.strategy,
            "keep_recent": self.keep_recent,
            "summary_model": f"{link.provider} {link.base_url} {link.model}",
            "summary_timeout_s": self.summary_timeout_s,
            "hold_messages": self.hold_messages,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryScope:
    """Whose memories an agent writes (itself, or nobody) and whose it may read."""

    mode: str
    read_from: tuple[str, ...]


@sealed_class("ResolvedAgentExecution")
@dataclass(frozen=True, slots=True, kw_only=True, weakref_slot=True)
class ResolvedAgentExecution:
    """One agent's complete execution contract on one path; only `resolve()` mints it."""

    identity: AgentIdentity
    model: ModelBinding
    provider: Provider
    security: SecurityPolicy
    tools: ScopedToolRegistry
    approvals: ApprovalManager
    knobs: RuntimeKnobs
    context: ContextPolicy
    assembly: ScopedAssembly
    memory: MemoryScope
    skills: tuple[str, ...]
    mcp_bundles: tuple[str, ...]
    prompt_sections: tuple[PromptSection, ...]
    system_prompt: str
    ledger: ActionLedger
    # Token budgets' state and the usage table every model call is recorded in.
    usage: UsageMeter
    seal: InitVar[object]
    # Read at the start of every turn (pinned MCP resources); the engine wraps it as data.
    turn_context: tuple[TurnContext, ...] = ()
    # Which attachments a turn on this path takes and how (empty `accept` where none can arrive).
    media: MediaPolicy = NO_MEDIA

    def __post_init__(self, seal: object) -> None:
        if seal is not SEAL:
            raise SealViolation("ResolvedAgentExecution")
        if not (
            type(self.tools) is ScopedToolRegistry and vouched(self.tools)
            and type(self.approvals) is ApprovalManager and vouched(self.approvals)
        ):
            raise SealViolation("ResolvedAgentExecution (unsealed parts)")
        vouch(self)

    @staticmethod
    def minted(candidate: object) -> bool:
        """Return whether `candidate` is an execution `resolve()` minted, itself.

        Not a copy, nor an instance made around the constructor (`object.__new__`, a
        `__class__` swapped in, state from a forged pickle): the engine runs only these.
        """
        return type(candidate) is ResolvedAgentExecution and vouched(candidate)

    def tool_rows(self) -> list[dict[str, object]]:
        """One row per registered tool (`orchestrator tools`, the gateway's tool listing).

        `deferred` marks MCP tools of deferred bundles: registered, but sent to the model
        only once it activates them through `tool_search`.
        """
        rows: list[dict[str, object]] = []
        for name in self.tools.names:
            tool = self.tools.get(name)
            if tool is None:  # names come from the registry itself
                continue
            spec = tool.spec
            rows.append(
                {
                    "name": name,
                    "source": spec.source.value,
                    "read_only": spec.read_only,
                    "approval": self.approvals.rule_for(spec).value,
                    "deferred": name in self.tools.deferred,
                    "description": spec.description,
                }
            )
        return rows

    def describe(self) -> dict[str, object]:
        """Return the resolved values as plain data (parity tests, `orchestrator policy`)."""
        return {
            "agent": self.identity.agent,
            "path": self.identity.path.value,
            "parent": self.identity.parent,
            "provider": self.model.provider,
            "base_url": self.model.base_url,
            "model": self.model.model,
            "temperature": self.model.temperature,
            "max_output_tokens": self.model.max_output_tokens,
            "max_tokens_param": self.model.max_tokens_param,
            "fallback": [
                {"provider": link.provider, "base_url": link.base_url, "model": link.model,
                 "max_output_tokens": link.max_output_tokens}
                for link in self.model.fallback
            ],
            "autonomy": self.security.autonomy,
            "workspace": str(self.security.workspace),
            "shell_sandbox": self.security.shell_sandbox.describe(),
            "shell_limits": self.security.shell_sandbox.limits.describe(),
            "workspace_max_bytes": self.security.workspace_max_bytes,
            "http_fetch": {
                "allowed_hosts": list(self.security.http_allowed_hosts),
                "allow_private_addresses": self.security.http_allow_private_addresses,
                "max_bytes": self.security.http_max_bytes,
            },
            "tools": list(self.tools.names),
            "approval": self.approvals.describe(),
            "knobs": {
                "max_tool_iterations": self.knobs.max_tool_iterations,
                "turn_timeout_s": self.knobs.turn_timeout_s,
                "tool_timeout_s": self.knobs.tool_timeout_s,
                "max_tool_result_chars": self.knobs.max_tool_result_chars,
                "max_history_messages": self.knobs.max_history_messages,
                "max_actions_per_hour": self.knobs.max_actions_per_hour,
                "max_tokens_per_turn": self.knobs.max_tokens_per_turn,
                "max_tokens_per_day": self.knobs.max_tokens_per_day,
            },
            "context": self.context.describe(),
            "assembly": self.assembly.describe(),
            "memory": {"mode": self.memory.mode, "read_from": list(self.memory.read_from)},
            "skills": list(self.skills),
            "mcp_bundles": list(self.mcp_bundles),
            "prompt_sections": [s.name for s in self.prompt_sections],
            "media": self.media.describe(),
        }
