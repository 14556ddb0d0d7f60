"""`resolve()`: the one place an agent's policy becomes an executable contract."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Final

from orchestrator.config import AgentConfig, Config, PricesConfig
from orchestrator.media import MediaPolicy, Transcriber
from orchestrator.providers import ModelBinding, Prices
from orchestrator.errors import OrchestratorError, UnknownAgent
from orchestrator.private import private_dir
from orchestrator.policy import Interactivity, SecurityPolicy, matches_any
from orchestrator.seam._seal import SEAL
from orchestrator.seam.approval import ApprovalManager
from orchestrator.seam.execution import (
    AgentIdentity,
    ContextPolicy,
    MemoryScope,
    ResolvedAgentExecution,
    RuntimeKnobs,
)
from orchestrator.seam.paths import PATH_PROFILES, ConstructionPath, ScopedAssembly
from orchestrator.seam.assembly import assemble
from orchestrator.seam.parsers import parser_limits
from orchestrator.seam.sandbox import default_workspace, shell_sandbox
from orchestrator.seam.services import Services
from orchestrator.tools import SEND_FILE_NAME

__all__ = ["InteractivityNotAllowed", "mcp_servers_for", "media_as_written", "resolve", "uses_memory"]


class InteractivityNotAllowed(OrchestratorError):
    """A caller asked for an interactivity mode its path does not offer."""

    def __init__(self, path: ConstructionPath, mode: Interactivity) -> None:
        self.path, self.mode = path, mode
        super().__init__(f"path {path.value!r} cannot run with interactivity {mode.value!r}")


def resolve(
    config: Config,
    agent: str,
    *,
    path: ConstructionPath,
    services: Services,
    assembly: ScopedAssembly | None = None,
    interactivity: Interactivity | None = None,
    parent: str | None = None,
    ceiling: RuntimeKnobs | None = None,
) -> ResolvedAgentExecution:
    """Return the sealed execution for `agent` on `path`; cached per config generation.

    `assembly` and `ceiling` can only narrow what the agent's policy grants. Raises
    `UnknownAgent` for a name the config lacks and `InteractivityNotAllowed` when a
    caller asks a path for a mode it does not have.
    """
    # The MCP listing generation is part of the key: a list-changed refresh re-applies
    # each agent's gating on its next turn, without a restart.
    mcp_generation = services.mcp.generation if services.mcp is not None else None
    if ceiling is not None:  # a delegation's remaining budget differs per call: never cached
        return _resolve(
            config, agent, path=path, services=services, assembly=assembly,
            interactivity=interactivity, parent=parent, ceiling=ceiling,
        )
    key = (agent, path, assembly, interactivity, parent, ceiling, mcp_generation)
    per_generation = services.cache.get(config)
    if per_generation is None:
        per_generation = services.cache[config] = {}
    cached = per_generation.get(key)
    if cached is not None:
        return cached
    for stale in [k for k in per_generation if k[-1] != mcp_generation]:
        del per_generation[stale]
    execution = _resolve(
        config, agent, path=path, services=services, assembly=assembly,
        interactivity=interactivity, parent=parent, ceiling=ceiling,
    )
    per_generation[key] = execution
    return execution


def _resolve(
    config: Config,
    name: str,
    *,
    path: ConstructionPath,
    services: Services,
    assembly: ScopedAssembly | None,
    interactivity: Interactivity | None,
    parent: str | None,
    ceiling: RuntimeKnobs | None,
) -> ResolvedAgentExecution:
    agent = config.agents.get(name)
    if agent is None:
        raise UnknownAgent(name, sorted(config.agents))
    profile = PATH_PROFILES[path]
    knobs = _path_knobs(path, agent, assembly)
    mode = interactivity or profile.interactivity
    if mode not in profile.allowed_interactivity:
        raise InteractivityNotAllowed(path, mode)
    security = _security(config, name, agent)
    memory = _memory(agent, knobs)
    registry = assemble(
        config, name, agent, assembly=knobs, security=security, mcp=services.mcp,
        memory=services.memory, memory_scope=memory,
        peripherals=services.peripherals, delegation=services, chat=profile.has_chat and not knobs.no_chat,
    )
    sections = registry.prompt_sections
    binding = _binding(config, agent)
    turn_knobs = _knobs(agent).capped_by(ceiling)
    media = _media(config, agent, carried=profile.carries_media, send_file=registry.get(SEND_FILE_NAME) is not None)
    return ResolvedAgentExecution(
        identity=AgentIdentity(agent=name, path=path, parent=parent),
        model=binding,
        provider=services.providers.get(binding),
        security=security,
        tools=registry,
        approvals=ApprovalManager(
            agent=name,
            autonomy=agent.autonomy,
            auto_approve=agent.approval.auto_approve,
            always_ask=agent.approval.always_ask,
            timeout_s=agent.approval.timeout_s,
            interactivity=mode,
            audit=services.audit,
            seal=SEAL,
        ),
        knobs=turn_knobs,
        context=_context(config, agent, binding, services, turn_knobs),
        assembly=knobs,
        memory=memory,
        skills=agent.skills,
        mcp_bundles=agent.mcp_bundles if knobs.connect_mcp else (),
        prompt_sections=sections,
        turn_context=registry.turn_context,
        system_prompt="\n\n".join([agent.system_prompt, *(s.text for s in sections)]).strip(),
        ledger=services.ledger,
        usage=services.usage,
        media=dataclasses.replace(media, transcriber=_transcriber(config, agent, services)) if media.accept else media,
        seal=SEAL,
    )


def mcp_servers_for(
    config: Config,
    agent: str,
    *,
    path: ConstructionPath = ConstructionPath.CLI_RUN,
    assembly: ScopedAssembly | None = None,
) -> tuple[str, ...]:
    """Return the MCP servers `agent`'s bundles reach on `path`: connect these before resolving.

    Empty for an unknown agent (`resolve()` reports it) and on a path that withholds MCP.
    """
    policy = config.agents.get(agent)
    if policy is None or not _path_knobs(path, policy, assembly).connect_mcp:
        return ()
    servers: dict[str, None] = {}
    for bundle in policy.mcp_bundles:
        if bundle in config.mcp.bundles:
            servers.update(dict.fromkeys(config.mcp.bundles[bundle].servers))
    return tuple(servers)


def uses_memory(
    config: Config,
    agent: str,
    *,
    path: ConstructionPath = ConstructionPath.CLI_RUN,
    assembly: ScopedAssembly | None = None,
) -> bool:
    """Return whether `agent` has a memory scope on `path`: open the memory store before resolving.

    False for an unknown agent (`resolve()` reports it) and on a path that strips memory.
    """
    policy = config.agents.get(agent)
    return policy is not None and _memory(policy, _path_knobs(path, policy, assembly)).mode != "none"


def _path_knobs(
    path: ConstructionPath, agent: AgentConfig, assembly: ScopedAssembly | None
) -> ScopedAssembly:
    forced = PATH_PROFILES[path].knobs
    if path is ConstructionPath.ACP and agent.acp_enable_mcp:
        forced = dataclasses.replace(forced, connect_mcp=True)
    return forced.narrowed_by(assembly) if assembly is not None else forced


def _security(config: Config, name: str, agent: AgentConfig) -> SecurityPolicy:
    base = config.source.parent if config.source else Path.cwd()
    if agent.workspace:
        workspace = (base / agent.workspace).expanduser().resolve()
    else:
        workspace = default_workspace(config, name)
    try:
        private_dir(workspace)  # 0700, the folders above it made here too
    except OSError:
        pass  # the tools report a missing workspace when they are used
    workspace = workspace.resolve()  # the jail root, resolved once (see SecurityPolicy.confine)
    return SecurityPolicy(
        agent=name,
        autonomy=agent.autonomy,
        workspace=workspace,
        shell_allowed_commands=frozenset(agent.shell.allowed_commands),
        shell_denied_args=agent.shell.denied_args,
        shell_sandbox=shell_sandbox(name, agent),
        http_allowed_hosts=agent.http_fetch.allowed_hosts,
        http_allow_private_addresses=agent.http_fetch.allow_private_addresses,
        http_max_bytes=agent.http_fetch.max_bytes,
        workspace_max_bytes=agent.workspace_max_mb * 1024**2,
    )


def _binding(config: Config, agent: AgentConfig) -> ModelBinding:
    """Bind the agent's provider and model, with its `fallback` links (in order) as the chain's tail."""
    primary = _link(config, agent.provider, agent.model, agent.temperature)
    fallback = tuple(_link(config, link.provider, link.model, agent.temperature) for link in agent.fallback)
    return dataclasses.replace(primary, fallback=fallback) if fallback else primary


def _link(config: Config, name: str, model: str, temperature: float | None) -> ModelBinding:
    provider = config.providers[name]
    env_url = os.environ.get(provider.base_url_env) if provider.base_url_env else None
    base_url = env_url or provider.base_url
    if provider.model_env and os.environ.get(provider.model_env):
        model = os.environ[provider.model_env]
    return ModelBinding(
        provider=name,
        kind=provider.kind,
        base_url=base_url,
        model=model,
        temperature=temperature,
        api_key=provider.api_key,
        api_key_env=provider.api_key_env,
        base_url_env=provider.base_url_env,
        model_env=provider.model_env,
        base_url_from_env=bool(env_url),
        timeout_s=provider.timeout_s,
        max_retries=provider.max_retries,
        prices=_prices(provider.prices),
        stream_usage=provider.stream_usage,
        max_output_tokens=provider.max_output_tokens,
        max_tokens_param=provider.max_tokens_param,
    )


def _prices(prices: PricesConfig | None) -> Prices | None:
    if prices is None:
        return None
    cached = prices.cached_input if prices.cached_input is not None else prices.input
    written = prices.cache_write if prices.cache_write is not None else prices.input
    return Prices(input=prices.input, output=prices.output, cached_input=cached, cache_write=written)


def _knobs(agent: AgentConfig) -> RuntimeKnobs:
    b = agent.budget
    return RuntimeKnobs(
        max_tool_iterations=b.max_tool_iterations,
        turn_timeout_s=b.turn_timeout_s,
        tool_timeout_s=b.tool_timeout_s,
        max_tool_result_chars=b.max_tool_result_chars,
        max_history_messages=b.max_history_messages,
        max_actions_per_hour=b.max_actions_per_hour,
        max_tokens_per_turn=b.max_tokens_per_turn,
        max_tokens_per_day=b.max_tokens_per_day,
    )


# How many messages past the history window a `summarize` session holds until they are folded.
_UNFOLDED_SLACK: Final = 3


def _context(
    config: Config, agent: AgentConfig, binding: ModelBinding, services: Services, knobs: RuntimeKnobs
) -> ContextPolicy:
    """Resolve `[agents.X.context]`; the summary binding defaults to the agent's own chain."""
    ctx = agent.context
    summary = binding
    if ctx.summary_model is not None or ctx.summary_provider is not None:
        summary = _link(
            config, ctx.summary_provider or agent.provider, ctx.summary_model or agent.model, None
        )
    window = knobs.max_history_messages
    hold = window * (1 + _UNFOLDED_SLACK) if ctx.strategy == "summarize" else window
    return ContextPolicy(
        max_context_tokens=ctx.max_context_tokens,
        strategy=ctx.strategy,
        keep_recent=ctx.keep_recent,
        summary_model=summary,
        summarizer=services.providers.get(summary),
        summary_timeout_s=ctx.summary_timeout_s,
        hold_messages=hold,
    )


def _memory(agent: AgentConfig, knobs: ScopedAssembly) -> MemoryScope:
    if knobs.exclude_memory or agent.memory.scope == "none":
        return MemoryScope(mode="none", read_from=())
    return MemoryScope(mode=agent.memory.scope, read_from=agent.memory.read_from)


def media_as_written(config: Config, agent: str) -> MediaPolicy | None:
    """Return `agent`'s media policy as its config writes it (the matrix's `media` baseline).

    That is what a path that carries media and has a chat resolves; None for an unknown agent.
    """
    policy = config.agents.get(agent)
    if policy is None:
        return None
    granted = SEND_FILE_NAME in policy.tools and not matches_any(SEND_FILE_NAME, policy.excluded_tools)
    return _media(config, policy, carried=True, send_file=granted and policy.autonomy != "read_only")


def _media(config: Config, agent: AgentConfig, *, carried: bool, send_file: bool) -> MediaPolicy:
    """The agent's media policy on a path; `accept` is empty where no attachment can arrive."""
    media = agent.media
    provider = config.providers.get(agent.provider)
    model = provider.transcription_model if provider is not None and provider.kind == "openai" else None
    return MediaPolicy(
        accept=frozenset(media.accept) if carried else frozenset(),
        max_bytes=media.max_bytes,
        max_message_bytes=media.max_message_bytes,
        image_detail=media.image_detail,
        vision=agent.vision,
        echo_transcript=media.echo_transcript,
        transcription_model=model,
        transcription_provider=agent.provider if model is not None else None,
        send_file=send_file,
        pdf=parser_limits(agent),
    )


def _transcriber(config: Config, agent: AgentConfig, services: Services) -> Transcriber | None:
    # The agent's own provider transcribes (an OpenAI-kind endpoint with a transcription model).
    provider = config.providers.get(agent.provider)
    if provider is None or provider.kind != "openai" or provider.transcription_model is None:
        return None
    return services.providers.transcriber(_link(config, agent.provider, agent.model, None))
