"""One builder per construction path: the only way production code enters `resolve()`.

Each builder takes what its call site has (config, agent, services, and the site's own inputs:
`--allow`, a TTY, an approver, a parent turn, a step's or schedule's `tools`) and calls
`resolve()` with exactly the arguments its path declares. Call sites call their builder, and
`orchestrator policy matrix` calls the same builders, so the grid it prints is computed from
the code that runs turns, not from a copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from orchestrator.policy import Interactivity
from orchestrator.seam.paths import ConstructionPath, ScopedAssembly
from orchestrator.seam.resolve import resolve

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.seam.execution import ResolvedAgentExecution, RuntimeKnobs
    from orchestrator.seam.services import Services

__all__ = [
    "DEFAULT_BUILDERS",
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
]


def _narrowing(tools: Iterable[str] | None) -> ScopedAssembly | None:
    return ScopedAssembly(caller_allowed=frozenset(tools)) if tools is not None else None


def build_channel(config: Config, agent: str, services: Services) -> ResolvedAgentExecution:
    """Resolve a channel turn (`process_message`): defaults, in-channel prompts."""
    return resolve(config, agent, path=ConstructionPath.CHANNEL, services=services)


def build_cli_run(
    config: Config,
    agent: str,
    services: Services,
    *,
    caller_allowed: Iterable[str] | None = None,
    interactive: bool = False,
) -> ResolvedAgentExecution:
    """Resolve `orchestrator agent`: `--allow` narrows; interactive only on a TTY."""
    return resolve(
        config, agent, path=ConstructionPath.CLI_RUN, services=services,
        assembly=_narrowing(caller_allowed),
        interactivity=Interactivity.INTERACTIVE if interactive else Interactivity.NON_INTERACTIVE,
    )


def build_gateway_chat(config: Config, agent: str, services: Services) -> ResolvedAgentExecution:
    """Resolve `POST /api/agents/{a}/messages`: defaults, never an operator."""
    return resolve(config, agent, path=ConstructionPath.GATEWAY_CHAT, services=services)


def build_listing(config: Config, agent: str, services: Services) -> ResolvedAgentExecution:
    """Resolve a listing (`GET /api/agents/{a}/tools`, `orchestrator tools`): no turn runs."""
    return resolve(config, agent, path=ConstructionPath.LISTING, services=services)


def build_library(
    config: Config, agent: str, services: Services, *, approver_supplied: bool = False
) -> ResolvedAgentExecution:
    """Resolve an `orchestrator.Agent` turn: interactive only with a caller-supplied approver."""
    mode = Interactivity.INTERACTIVE if approver_supplied else Interactivity.NON_INTERACTIVE
    return resolve(config, agent, path=ConstructionPath.LIBRARY, services=services, interactivity=mode)


def build_delegate(
    config: Config,
    agent: str,
    services: Services,
    *,
    parent: str | None = None,
    interactivity: Interactivity | None = None,
    ceiling: RuntimeKnobs | None = None,
) -> ResolvedAgentExecution:
    """Resolve a `delegate` target: its own policy, the caller's mode, capped by `ceiling`."""
    return resolve(
        config, agent, path=ConstructionPath.DELEGATE, services=services,
        parent=parent, interactivity=interactivity, ceiling=ceiling,
    )


def build_sop_step(
    config: Config,
    agent: str,
    services: Services,
    *,
    parent: str | None = None,
    interactivity: Interactivity | None = None,
    step_tools: Iterable[str] | None = None,
) -> ResolvedAgentExecution:
    """Resolve an SOP step: the step agent's policy, narrowed by the step's `tools`."""
    return resolve(
        config, agent, path=ConstructionPath.SOP_STEP, services=services,
        assembly=_narrowing(step_tools), interactivity=interactivity, parent=parent,
    )


def build_acp(config: Config, agent: str, services: Services) -> ResolvedAgentExecution:
    """Resolve an `orchestrator acp` turn (the path's own knobs; request_permission)."""
    return resolve(config, agent, path=ConstructionPath.ACP, services=services)


def build_schedule(
    config: Config, agent: str, services: Services, *, tools: Iterable[str] | None = None, deliver_to: bool = False
) -> ResolvedAgentExecution:
    """Resolve a scheduled run: the schedule's `tools` narrow it; never an operator.

    `deliver_to`: the schedule posts its result to a chat, so `send_file` (when the agent
    names it) may post there too; without one the run answers no chat (`no_chat`).
    """
    knobs = ScopedAssembly(caller_allowed=frozenset(tools) if tools is not None else None, no_chat=not deliver_to)
    return resolve(config, agent, path=ConstructionPath.SCHEDULE, services=services, assembly=knobs)


_Builder = Callable[["Config", str, "Services"], "ResolvedAgentExecution"]

DEFAULT_BUILDERS: Final[MappingProxyType[ConstructionPath, _Builder]] = MappingProxyType(
    {
        ConstructionPath.CHANNEL: build_channel,
        ConstructionPath.CLI_RUN: build_cli_run,
        ConstructionPath.GATEWAY_CHAT: build_gateway_chat,
        ConstructionPath.LISTING: build_listing,
        ConstructionPath.LIBRARY: build_library,
        ConstructionPath.DELEGATE: build_delegate,
        ConstructionPath.SOP_STEP: build_sop_step,
        ConstructionPath.ACP: build_acp,
        ConstructionPath.SCHEDULE: build_schedule,
    }
)
"""Each path's builder with its call-site inputs left at their defaults (no narrowing)."""


def build_on_path(
    config: Config, agent: str, path: ConstructionPath, services: Services
) -> ResolvedAgentExecution:
    """Resolve `agent` on `path` with default call-site inputs (`orchestrator policy --path`)."""
    return DEFAULT_BUILDERS[path](config, agent, services)
