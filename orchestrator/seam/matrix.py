"""The live (setting x path) parity matrix behind `orchestrator policy matrix`.

Every column is built through the same path builder production uses, with representative
call-site inputs and the services its entry point opens (`open_services`); every cell
compares that execution's value for one setting with the policy baseline (cli run, no
knobs). The `sop_reach` row compares the SOPs a chat sender routed to the agent may start,
as the seam decides them for `/sop` (`resolve_chat_commands`), with the routes' `sops` as
written; only the channel path takes chat commands. A cell is `enforced` when equal,
`narrowed: <knob>` when it
differs only as a knob the path declares explains (and only narrower), `gap` otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Final

from orchestrator.policy import Interactivity
from orchestrator.seam.chat_commands import resolve_chat_commands
from orchestrator.seam.path_builders import (
    build_acp,
    build_channel,
    build_cli_run,
    build_delegate,
    build_gateway_chat,
    build_library,
    build_listing,
    build_schedule,
    build_sop_step,
)
from orchestrator.seam.paths import PATH_PROFILES, ConstructionPath
from orchestrator.seam.resolve import media_as_written
from orchestrator.tools import SEND_FILE_NAME, ToolSource

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.providers import ModelBinding
    from orchestrator.seam.execution import ResolvedAgentExecution, RuntimeKnobs
    from orchestrator.seam.services import Services

__all__ = [
    "BUDGETS", "COLUMNS", "SETTINGS", "MatrixColumn", "agent_matrix", "chat_sop_reach", "classify", "granted_sops",
    "matrix_columns", "parity_matrix", "settings_of",
]

# The grid's columns, in order (each a path, or a path with a representative call-site input).
COLUMNS: Final = (
    "channel", "cli_run", "gateway_chat", "listing", "library", "library+approver",
    "delegate", "sop_step", "acp", "schedule",
)
BUDGETS: Final = (
    "max_tool_iterations", "turn_timeout_s", "tool_timeout_s",
    "max_tool_result_chars", "max_history_messages", "max_actions_per_hour",
    "max_tokens_per_turn", "max_tokens_per_day",
)
# The grid's rows, in order, and the declared knobs that may narrow each (nothing else may change it).
SETTINGS: Final[Mapping[str, frozenset[str]]] = {
    "tools": frozenset({"caller_allowed", "connect_mcp"}),  # connect_mcp withholds tool_search
    "excluded_tools": frozenset(),
    "mcp_scope": frozenset({"caller_allowed", "connect_mcp"}),
    "deferred_tools": frozenset({"caller_allowed", "connect_mcp"}),
    "approval_rules": frozenset(),
    "interactivity": frozenset({"interactivity"}),
    **{f"budget.{b}": frozenset({"ceiling"}) for b in BUDGETS},
    "memory": frozenset({"caller_allowed", "exclude_memory"}),
    "skills": frozenset({"caller_allowed"}),
    "peripherals": frozenset({"caller_allowed", "connect_peripherals"}),
    "provider_binding": frozenset(),
    "context": frozenset(),  # [agents.X.context]: token budget, strategy, summarizer; a delegate's own
    "temperature": frozenset(),
    "prompt_sections": frozenset({"connect_mcp"}),  # pinned MCP resources
    "shell_sandbox": frozenset(),  # the sandbox kind, network and limits: never narrowed per path
    "sop_reach": frozenset({"no_chat_commands"}),  # `routes[i]:<sop>` a chat sender may start
    "network": frozenset(),  # [http_fetch] limits of http_fetch and skill http tools
    # [media] as written: what attachments a turn takes, their caps, vision, transcription, send_file
    "media": frozenset({"no_media", "no_chat"}),
}
# Declared by every column but the channel: no chat command (so no `/sop`) reaches that path.
_NO_CHAT: Final = ("no_chat_commands",)

Value = object


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixColumn:
    """One column: a path built with representative inputs, and the knobs those inputs declare."""

    label: str
    execution: ResolvedAgentExecution
    declared: frozenset[str]
    # `routes[i]:<sop>` entries the path lets a chat sender start (the `sop_reach` row)
    chat_sops: tuple[str, ...] = ()


def _names(execution: ResolvedAgentExecution, *sources: ToolSource) -> list[str]:
    tools = execution.tools
    out = []
    for name in tools.names:
        tool = tools.get(name)
        if tool is not None and tool.spec.source in sources:
            out.append(name)
    return sorted(out)


def settings_of(execution: ResolvedAgentExecution, excluded: Iterable[str]) -> dict[str, Value]:
    """Return each grid setting's value on `execution` (lists are the narrowable ones).

    All but `sop_reach`, which is the routes' (see `parity_matrix`), not the execution's.
    """
    described = execution.describe()
    approval = dict(execution.approvals.describe())
    deferred = execution.tools.deferred
    mode = execution.memory.mode
    values: dict[str, Value] = {
        # send_file is offered by path (a chat to post to): the `media` row holds it
        "tools": [n for n in _names(execution, ToolSource.BUILTIN, ToolSource.SEAM) if n != SEND_FILE_NAME],
        "excluded_tools": sorted(n for n in execution.tools.names if any(fnmatchcase(n, p) for p in excluded)),
        "mcp_scope": [f"bundle:{b}" for b in execution.mcp_bundles]
        + [n for n in _names(execution, ToolSource.MCP) if n not in deferred],
        "deferred_tools": sorted(deferred),
        "approval_rules": {k: v for k, v in approval.items() if k != "interactivity"},
        "interactivity": approval["interactivity"],
        "memory": ([f"scope:{mode}", *(f"read_from:{a}" for a in execution.memory.read_from)] if mode != "none" else [])
        + _names(execution, ToolSource.MEMORY),
        "skills": [f"skill:{s}" for s in execution.skills] + _names(execution, ToolSource.SKILL),
        "peripherals": _names(execution, ToolSource.PERIPHERAL),
        "provider_binding": _chain(execution),
        "context": execution.context.describe(),
        "temperature": described["temperature"],
        "prompt_sections": [f"system_prompt:{_own_prompt(execution)}", *(s.name for s in execution.prompt_sections)],
        "shell_sandbox": _sandbox(execution),
        "network": _network(execution),
        "media": execution.media.describe(),
    }
    knobs = described["knobs"]
    assert isinstance(knobs, dict)
    for budget in BUDGETS:
        values[f"budget.{budget}"] = knobs[budget]
    return values


def _chain(execution: ResolvedAgentExecution) -> list[str]:
    """List every link of the model binding, primary first, in the order the chain tries them."""
    return [f"{link.provider} {link.base_url} {link.model} ({_output_limit(link)})" for link in execution.model.chain]


def _output_limit(link: ModelBinding) -> str:
    # the OpenAI kind also names the member the limit is sent in (Anthropic has one: `max_tokens`)
    member = f" as {link.max_tokens_param}" if link.kind == "openai" else ""
    return f"max_output_tokens {link.max_output_tokens}{member}"


def _sandbox(execution: ResolvedAgentExecution) -> str:
    sandbox = execution.security.shell_sandbox
    limits = sandbox.limits
    # env values are fingerprinted, never shown (one may be a credential)
    env = hashlib.sha256(repr(sandbox.env).encode()).hexdigest()[:12]
    return (f"{sandbox.describe()}; env {env}; workspace {execution.security.workspace}, "
            f"max {execution.security.workspace_max_bytes}; cpu {limits.cpu_seconds}s, "
            f"as {limits.address_space_bytes}, fsize {limits.file_size_bytes}, tmp {limits.tmp_bytes}, "
            f"nproc {limits.processes}, output {limits.output_bytes}")
def _network(execution: ResolvedAgentExecution) -> list[str]:
    """List the network limits: the allowed hosts (none = no host), the private guard, the cap."""
    security = execution.security
    return [
        *(f"host:{h}" for h in security.http_allowed_hosts),
        f"private_addresses:{'allowed' if security.http_allow_private_addresses else 'refused'}",
        f"max_bytes:{security.http_max_bytes}",
    ]


def _own_prompt(execution: ResolvedAgentExecution) -> str:
    """Fingerprint the agent's own system prompt (the sections are listed by name beside it)."""
    own = execution.system_prompt
    for section in execution.prompt_sections:
        own = own.replace(section.text, "")
    return hashlib.sha256(own.strip().encode()).hexdigest()[:12]


def _narrower(value: Value, baseline: Value) -> bool:
    if isinstance(value, list) and isinstance(baseline, list):
        return set(value) <= set(baseline)
    if isinstance(value, (int, float)) and isinstance(baseline, (int, float)):
        return value <= baseline
    return False


def classify(
    setting: str, baseline: Value, value: Value, declared: Iterable[str], *, path: ConstructionPath | None = None
) -> str:
    """Return `enforced`, `narrowed: <knob>[, <knob>]` or `gap` for one cell.

    A difference is `narrowed` only when a knob the path declared may change this setting
    and the value is narrower than the baseline (a subset, a lower budget, or an
    interactivity mode the path's profile allows); anything else is a `gap`.
    """
    if value == baseline:
        return "enforced"
    knobs = sorted(set(declared) & SETTINGS.get(setting, frozenset()))
    if not knobs:
        return "gap"
    if setting == "interactivity":
        allowed = PATH_PROFILES[path].allowed_interactivity if path is not None else frozenset(Interactivity)
        ok = isinstance(value, str) and Interactivity(value) in allowed
    else:
        ok = _narrower(value, baseline)
    return f"narrowed: {', '.join(knobs)}" if ok else "gap"


def _declared(execution: ResolvedAgentExecution, baseline: ResolvedAgentExecution, extra: Iterable[str] = ()) -> frozenset[str]:
    mine, base = execution.assembly.describe(), baseline.assembly.describe()
    knobs = {k for k in mine if mine[k] != base[k]}
    if execution.approvals.interactivity is not baseline.approvals.interactivity:
        knobs.add("interactivity")
    return frozenset(knobs | set(extra))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    """What one production entry point opens services for (the arguments of `open_services`)."""

    agents: tuple[str, ...]
    path: ConstructionPath
    sops: tuple[str, ...] = ()
    reloadable: bool = False


def _entries(config: Config, agent: str, parent: str) -> dict[str, _Entry]:
    """Return, per column, the entry point whose services its turns run with."""
    daemon = _Entry(agents=tuple(config.agents), path=ConstructionPath.CHANNEL, sops=tuple(config.sops), reloadable=True)
    own = {p: _Entry(agents=(agent,), path=p) for p in ConstructionPath}
    step_sops = tuple(
        name for name, sop in config.sops.items() if any((step.agent or sop.agent) == agent for step in sop.steps)
    )
    return {
        "cli_run": own[ConstructionPath.CLI_RUN],  # `orchestrator agent`; also the baseline
        "channel": daemon, "gateway_chat": daemon, "schedule": daemon,  # all run inside the daemon
        "listing": own[ConstructionPath.LISTING],
        "library": own[ConstructionPath.LIBRARY], "library+approver": own[ConstructionPath.LIBRARY],
        # the parent's `orchestrator agent` turn delegates to `agent`
        "delegate": _Entry(agents=(parent,), path=ConstructionPath.CLI_RUN),
        # `orchestrator sop` of an SOP with a step run as `agent` (else the step path itself)
        "sop_step": _Entry(agents=(), path=ConstructionPath.SOP_STEP, sops=step_sops) if step_sops
        else own[ConstructionPath.SOP_STEP],
        "acp": own[ConstructionPath.ACP],
    }


async def _open_entries(
    config: Config, entries: Mapping[str, _Entry], stack: AsyncExitStack, *, state_dir: Path
) -> dict[str, Services]:
    """Open each distinct entry's services once, through `open_services`, isolated for a listing.

    Isolated means: the state is `state_dir` (a throwaway), no MCP server is started and no
    port can open; every column is isolated alike, so none differs for it.
    """
    from orchestrator.seam.opening import open_services

    opened: dict[_Entry, Services] = {}
    for entry in entries.values():
        if entry not in opened:
            opened[entry] = await stack.enter_async_context(
                open_services(
                    config, entry.agents, entry.path, sops=entry.sops, reloadable=entry.reloadable,
                    state_dir=state_dir, connect_mcp=False, connect_peripherals=False,
                )
            )
    return {label: opened[entry] for label, entry in entries.items()}


def matrix_columns(
    config: Config,
    agent: str,
    services: Mapping[str, Services],
    *,
    parent: str,
    ceiling: RuntimeKnobs,
    schedule_tools: Iterable[str] | None,
    schedule_delivers: bool = False,
) -> tuple[ResolvedAgentExecution, list[MatrixColumn]]:
    """Build the baseline and every path's column through the production path builders.

    `services` holds each column's services (keyed by label), opened as its entry point opens them;
    the schedule column has the representative schedule's `tools` and whether it has a `deliver_to`.
    """
    baseline = build_cli_run(config, agent, services["cli_run"])
    builds: list[tuple[str, Callable[[Services], ResolvedAgentExecution], tuple[str, ...]]] = [
        ("channel", lambda s: build_channel(config, agent, s), ()),
        ("cli_run", lambda s: build_cli_run(config, agent, s), _NO_CHAT),
        ("gateway_chat", lambda s: build_gateway_chat(config, agent, s), _NO_CHAT),
        ("listing", lambda s: build_listing(config, agent, s), _NO_CHAT),
        ("library", lambda s: build_library(config, agent, s), _NO_CHAT),
        ("library+approver", lambda s: build_library(config, agent, s, approver_supplied=True), _NO_CHAT),
        ("delegate", lambda s: build_delegate(config, agent, s, parent=parent, ceiling=ceiling),
         ("ceiling", *_NO_CHAT)),
        ("sop_step", lambda s: build_sop_step(config, agent, s, parent=parent), _NO_CHAT),
        ("acp", lambda s: build_acp(config, agent, s), _NO_CHAT),
        ("schedule", lambda s: build_schedule(config, agent, s, tools=schedule_tools, deliver_to=schedule_delivers),
         _NO_CHAT),
    ]
    assert [label for label, _, _ in builds] == list(COLUMNS)
    columns = []
    for label, build, extra in builds:
        execution = build(services[label])
        profile = PATH_PROFILES[execution.identity.path]
        # a path that cannot bring attachments, or has no chat to post a file to, says so
        chat = profile.has_chat and not execution.assembly.no_chat
        media_knobs = (*(() if profile.carries_media else ("no_media",)), *(() if chat else ("no_chat",)))
        columns.append(
            MatrixColumn(
                label=label, execution=execution, declared=_declared(execution, baseline, (*extra, *media_knobs)),
                chat_sops=chat_sop_reach(config, agent) if label == "channel" else (),
            )
        )
    return baseline, columns


def chat_sop_reach(config: Config, agent: str) -> tuple[str, ...]:
    """Return `routes[i]:<sop>` for every SOP `/sop` may start from a route to `agent` (the seam's decision)."""
    return tuple(
        f"routes[{index}]:{sop}"
        for index, route in enumerate(config.routes)
        if route.agent == agent
        for sop in config.sops
        if resolve_chat_commands(config, route).may_start(sop)
    )


def granted_sops(config: Config, agent: str) -> tuple[str, ...]:
    """Return `routes[i]:<sop>` for every SOP the routes to `agent` list in `sops` (the policy as written)."""
    return tuple(
        f"routes[{index}]:{sop}" for index, route in enumerate(config.routes) if route.agent == agent for sop in route.sops
    )


def parity_matrix(
    baseline: ResolvedAgentExecution,
    columns: Iterable[MatrixColumn],
    excluded: Iterable[str],
    *,
    granted: Iterable[str] = (),
    media: Iterable[str] | None = None,
) -> dict[str, dict[str, str]]:
    """Return {setting: {column: verdict}} for one agent.

    `granted` is the routes' `sops` baseline; `media` the agent's media policy as written
    (`media_as_written(...).describe()`; None: the baseline execution's).
    """
    patterns = tuple(excluded)
    base = settings_of(baseline, patterns) | {"sop_reach": sorted(granted)}
    if media is not None:
        base["media"] = list(media)
    grid: dict[str, dict[str, str]] = {setting: {} for setting in SETTINGS}
    for column in columns:
        values = settings_of(column.execution, patterns) | {"sop_reach": sorted(column.chat_sops)}
        for setting in SETTINGS:
            grid[setting][column.label] = classify(
                setting, base[setting], values[setting], column.declared, path=column.execution.identity.path
            )
    return grid


async def agent_matrix(config: Config, agent: str, *, state_dir: Path) -> dict[str, dict[str, str]]:
    """Return the grid for `agent` with representative inputs taken from the config.

    Each column's services are opened through `open_services` exactly as its production
    entry point opens them (isolated: state in `state_dir`, no MCP server, no port), so a
    service one entry point forgets for a reached agent shows as a gap. The delegate and
    SOP columns run under a parent (an agent that delegates to `agent`, else the agent
    itself) with the ceiling a delegate call gets at the parent's first iteration; the
    schedule column uses the agent's first schedule that narrows (else its first schedule):
    its `tools`, and its `deliver_to` (a chat `send_file` may post to). The
    `sop_reach` baseline is the `sops` of the routes to `agent`, as written.
    """
    from orchestrator.errors import UnknownAgent
    from orchestrator.seam.delegation import _UNCAPPED
    from orchestrator.seam.execution import RuntimeKnobs

    policy = config.agents.get(agent)
    if policy is None:
        raise UnknownAgent(agent, sorted(config.agents))
    parent = next((name for name, other in config.agents.items() if agent in other.delegates), agent)
    own = [s for s in config.schedules if s.agent == agent]
    representative = next((s for s in own if s.tools is not None), own[0] if own else None)
    schedule_tools = representative.tools if representative is not None else None
    schedule_delivers = representative is not None and representative.deliver_to is not None
    async with AsyncExitStack() as stack:
        services = await _open_entries(config, _entries(config, agent, parent), stack, state_dir=state_dir)
        caller = build_cli_run(config, parent, services["delegate"]).knobs
        time_left = min(caller.turn_timeout_s, caller.tool_timeout_s)
        ceiling = RuntimeKnobs(
            max_tool_iterations=max(caller.max_tool_iterations - 1, 1),
            turn_timeout_s=time_left,
            tool_timeout_s=time_left,
            max_tool_result_chars=caller.max_tool_result_chars,
            max_history_messages=_UNCAPPED,
            max_actions_per_hour=_UNCAPPED,
            max_tokens_per_turn=caller.max_tokens_per_turn,
            max_tokens_per_day=_UNCAPPED,
        )
        baseline, columns = matrix_columns(
            config, agent, services, parent=parent, ceiling=ceiling, schedule_tools=schedule_tools,
            schedule_delivers=schedule_delivers,
        )
        written = media_as_written(config, agent)
        return parity_matrix(
            baseline, columns, policy.excluded_tools, granted=granted_sops(config, agent),
            media=written.describe() if written is not None else None,
        )
