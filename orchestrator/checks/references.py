"""Cross-reference checks: dangling names and tool names that match nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.checks.fallback import check_fallback
from orchestrator.checks.schedules import check_schedules
from orchestrator.checks.skills import check_skills
from orchestrator.checks.sops import check_sops
from orchestrator.config import AgentConfig, Config, SecretRef, check_gateway, resolve_secret, webhook_secret_problem
from orchestrator.errors import ConfigProblem, SecretError
from orchestrator.policy import is_granted
from orchestrator.skills import find_skill_dirs
from orchestrator.text import suggest
from orchestrator.tools import BUILTIN_NAMES, DELEGATE_TOOL_NAME, MEMORY_TOOL_NAMES, RESERVED_TOOL_NAMES, SEND_FILE_NAME

__all__ = ["RESERVED_AGENT_NAMES", "check_references"]

_GLOB_CHARS = frozenset("*?[")
# What OpenAI-compatible APIs accept as a function name (peripheral tools are `<name>__<command>`).
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Agent names that are `orchestrator policy` subcommands.
RESERVED_AGENT_NAMES = frozenset({"matrix"})
# `[mcp.servers.X] env` / `headers` names whose values must be secret references: these
# header names, any name containing one of the parts, and any name with one of the words.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_SECRET_PARTS = ("token", "key", "secret", "password", "passwd", "auth")
_SECRET_WORDS = frozenset({"CREDENTIAL", "CREDENTIALS", "COOKIE", "PAT"})


def check_references(config: Config, *, shown: str) -> list[ConfigProblem]:
    """Return one problem per dangling reference or unmatched tool name."""
    problems: list[ConfigProblem] = []
    problems.extend(_check_mcp(config, shown))
    problems.extend(_check_peripherals(config, shown))
    problems.extend(_check_channels(config, shown))
    problems.extend(
        check_gateway(config.gateway, shown=shown, base=config.source.parent if config.source else None)
    )
    problems.extend(check_schedules(config, shown=shown))
    problems.extend(check_fallback(config))
    skill_dirs = find_skill_dirs(config)
    problems.extend(check_skills(config, shown=shown, skill_dirs=skill_dirs))
    namespaces = set(config.mcp.servers) | set(config.peripherals) | set(skill_dirs)
    known_tools = BUILTIN_NAMES | RESERVED_TOOL_NAMES
    problems.extend(
        check_sops(config, shown=shown, check_tool=lambda t: _check_reference(t, known_tools, namespaces))
    )
    for name, agent in config.agents.items():
        file = config.origin_of(name)
        base = f"agents.{name}"
        if name in RESERVED_AGENT_NAMES:  # `orchestrator policy matrix` must stay unambiguous
            problems.append(ConfigProblem(file, base, f"{name!r} is a reserved name (`orchestrator policy {name}`)"))
        for path, message in _check_agent(config, agent, BUILTIN_NAMES, namespaces, skill_dirs):
            problems.append(ConfigProblem(file, f"{base}.{path}", message))
    return problems


def _check_agent(
    config: Config,
    agent: AgentConfig,
    builtins: frozenset[str],
    namespaces: set[str],
    skills: dict[str, Path],
) -> Iterator[tuple[str, str]]:
    if agent.provider not in config.providers:
        yield "provider", f"unknown provider {agent.provider!r}" + suggest(
            agent.provider, config.providers
        )
    summary_provider = agent.context.summary_provider
    if summary_provider is not None and summary_provider not in config.providers:
        yield "context.summary_provider", f"unknown provider {summary_provider!r}" + suggest(
            summary_provider, config.providers
        )
    refs: tuple[tuple[str, tuple[str, ...], Iterable[str], str], ...] = (
        ("mcp_bundles", agent.mcp_bundles, config.mcp.bundles, "MCP bundle"),
        ("skills", agent.skills, skills, "skill"),
        ("peripherals", agent.peripherals, config.peripherals, "peripheral"),
        ("delegates", agent.delegates, config.agents, "agent"),
        ("memory.read_from", agent.memory.read_from, config.agents, "agent"),
    )
    for key, names, known, label in refs:
        known_names = list(known)
        for i, ref in enumerate(names):
            if ref not in known_names:
                yield f"{key}[{i}]", f"unknown {label} {ref!r}" + suggest(ref, known_names)
    for i, entry in enumerate(agent.tools):
        problem = _check_grant(entry, builtins)
        if entry == DELEGATE_TOOL_NAME:
            problem = None if agent.delegates else "'delegate' grants nothing without a non-empty delegates list"
        if entry == SEND_FILE_NAME:
            problem = None  # offered on paths with a chat (the seam decides)
        if problem:
            yield f"tools[{i}]", problem
    if not agent.http_fetch.allowed_hosts and is_granted(
        "http_fetch", allowed=agent.tools, excluded=agent.excluded_tools
    ):
        yield "http_fetch.allowed_hosts", (
            "http_fetch is granted but no host is allowed, so every fetch would be refused: "
            'list the hosts (names or globs; ["*"] = any public host), or add http_fetch to '
            "excluded_tools"
        )
    for key, entries in (
        ("excluded_tools", agent.excluded_tools),
        ("approval.auto_approve", agent.approval.auto_approve),
        ("approval.always_ask", agent.approval.always_ask),
    ):
        for i, entry in enumerate(entries):
            problem = _check_reference(
                entry, builtins | RESERVED_TOOL_NAMES, namespaces
            )
            if problem:
                yield f"{key}[{i}]", problem


def _check_grant(entry: str, builtins: frozenset[str]) -> str | None:
    if "__" in entry:
        return (
            f"{entry!r} looks like an MCP/skill/peripheral tool; those are granted through "
            "mcp_bundles, skills and peripherals, not tools"
        )
    if entry in MEMORY_TOOL_NAMES:
        return f"{entry!r} is a memory tool; memory tools are granted by [memory] scope = \"agent\", not tools"
    if _GLOB_CHARS & set(entry):
        if not any(fnmatchcase(b, entry) for b in builtins):
            return f"pattern {entry!r} matches no built-in tool"
        return None
    if entry not in builtins:
        return f"unknown tool {entry!r}" + suggest(entry, builtins)
    return None


def _check_reference(entry: str, builtins: frozenset[str], namespaces: set[str]) -> str | None:
    if "__" in entry:
        prefix = entry.split("__", 1)[0]
        if prefix in namespaces or (_GLOB_CHARS & set(prefix)):
            return None
        return f"{entry!r} names no configured MCP server, skill or peripheral {prefix!r}" + suggest(
            prefix, namespaces
        )
    if _GLOB_CHARS & set(entry):
        return None if any(fnmatchcase(b, entry) for b in builtins) else (
            f"pattern {entry!r} matches no tool"
        )
    if entry not in builtins:
        return f"unknown tool {entry!r}" + suggest(entry, builtins)
    return None


def _check_mcp(config: Config, shown: str) -> Iterator[ConfigProblem]:
    for name, server in config.mcp.servers.items():
        base = f"mcp.servers.{name}"
        if "__" in name:
            yield ConfigProblem(shown, base, "server names may not contain '__'")
        if server.transport == "stdio" and not server.command:
            yield ConfigProblem(shown, f"{base}.command", "required for transport 'stdio'")
        if server.transport == "http" and not server.url:
            yield ConfigProblem(shown, f"{base}.url", "required for transport 'http'")
        if server.url and _has_password(server.url):
            yield ConfigProblem(
                shown, f"{base}.url",
                "a URL with a password: drop the credentials and send them as a header "
                "given as a reference (e.g. Authorization = \"file:PATH\")",
            )
        for key, values in (("env", server.env), ("headers", server.headers)):
            for entry, value in values.items():
                problem = _check_secret_value(entry, value)
                if problem:
                    yield ConfigProblem(shown, f"{base}.{key}.{entry}", problem)
    for name, bundle in config.mcp.bundles.items():
        base = f"mcp.bundles.{name}"
        for i, ref in enumerate(bundle.servers):
            if ref not in config.mcp.servers:
                yield ConfigProblem(
                    shown,
                    f"{base}.servers[{i}]",
                    f"unknown MCP server {ref!r}" + suggest(ref, config.mcp.servers),
                )
        for key, table in (("tools", bundle.tools), ("pinned_resources", bundle.pinned_resources)):
            for ref in table:
                if ref not in bundle.servers:
                    yield ConfigProblem(
                        shown, f"{base}.{key}.{ref}", f"server {ref!r} is not in this bundle's servers"
                    )
        for ref, entries in bundle.tools.items():
            for i, entry in enumerate(entries):
                if entry.startswith(f"{ref}__"):
                    yield ConfigProblem(
                        shown,
                        f"{base}.tools.{ref}[{i}]",
                        f"list the server's own tool names: {entry[len(ref) + 2:]!r}, not {entry!r}",
                    )


def _check_peripherals(config: Config, shown: str) -> Iterator[ConfigProblem]:
    ports: dict[str, str] = {}
    for name, device in config.peripherals.items():
        base = f"peripherals.{name}"
        if "__" in name:
            yield ConfigProblem(shown, base, "peripheral names may not contain '__'")
        for i, command in enumerate(device.commands):
            if not _FUNCTION_NAME.fullmatch(f"{name}__{command}"):
                yield ConfigProblem(
                    shown, f"{base}.commands[{i}]",
                    f"tool name '{name}__{command}' is not a valid function name "
                    "(letters, digits, '_' and '-', at most 64 characters)",
                )
        for i, command in enumerate(device.read_only_commands):
            if command not in device.commands:
                yield ConfigProblem(
                    shown, f"{base}.read_only_commands[{i}]",
                    f"{command!r} is not one of this peripheral's commands" + suggest(command, device.commands),
                )
        other = ports.setdefault(device.port, name)
        if other != name:
            yield ConfigProblem(shown, f"{base}.port", f"{device.port!r} is already peripherals.{other}'s port")


def _check_secret_value(name: str, value: str) -> str | None:
    """Return a problem when a value is a malformed reference or a literal credential."""
    scheme, sep, target = value.partition(":")
    if sep and scheme in ("env", "file"):
        return None if target else f"reference {value!r} names nothing after '{scheme}:'"
    lowered = name.lower()
    words = {w for w in name.upper().replace("-", "_").split("_") if w}
    if lowered in _SECRET_HEADERS or any(p in lowered for p in _SECRET_PARTS) or words & _SECRET_WORDS:
        return (
            f"{name!r} looks like a secret: give it as a reference ('env:NAME' or 'file:PATH'), "
            "not a literal value"
        )
    if _has_password(value):
        return (
            "the value is a URL with a password: give the whole URL as a reference "
            "('env:NAME' or 'file:PATH'), not a literal value"
        )
    return None


def _has_password(value: str) -> bool:
    try:
        return bool(urlsplit(value.strip()).password)
    except ValueError:  # a malformed URL (bad port, bracket) still may carry one
        return "@" in value and "://" in value


def _webhook_secret_problem(ref: SecretRef, base: Path | None) -> str | None:
    """Check the secret when it can be read here; one that cannot is checked by the daemon at start."""
    try:
        return webhook_secret_problem(resolve_secret(ref, base=base))
    except SecretError:
        return None  # resolved in the daemon's environment (`channel_secret_problems`)


def _check_channels(config: Config, shown: str) -> Iterator[ConfigProblem]:
    for name, channel in config.channels.items():
        base = f"channels.{name}"
        if channel.kind == "telegram" and channel.mode == "webhook":
            if not channel.webhook_url:
                yield ConfigProblem(shown, f"{base}.webhook_url", "required for mode 'webhook'")
            if channel.webhook_secret is None:
                yield ConfigProblem(shown, f"{base}.webhook_secret", "required for mode 'webhook'")
        if channel.kind == "telegram" and channel.webhook_secret is not None:
            problem = _webhook_secret_problem(channel.webhook_secret, config.source.parent if config.source else None)
            if problem:
                yield ConfigProblem(shown, f"{base}.webhook_secret", problem)
        if channel.kind == "slack" and channel.mode == "socket" and channel.app_token is None:
            yield ConfigProblem(shown, f"{base}.app_token", "required for mode 'socket'")
        if channel.kind == "slack" and channel.mode == "http" and channel.signing_secret is None:
            yield ConfigProblem(shown, f"{base}.signing_secret", "required for mode 'http'")
    terminals = [n for n, c in config.channels.items() if c.kind == "terminal"]
    if len(terminals) > 1:
        yield ConfigProblem(shown, f"channels.{terminals[1]}", "only one terminal channel can own stdin")
    for i, route in enumerate(config.routes):
        base = f"routes[{i}]"
        if route.channel not in config.channels:
            yield ConfigProblem(
                shown, f"{base}.channel", f"unknown channel {route.channel!r}" + suggest(route.channel, config.channels)
            )
        if route.agent not in config.agents:
            yield ConfigProblem(
                shown, f"{base}.agent", f"unknown agent {route.agent!r}" + suggest(route.agent, config.agents)
            )
        for j, sop in enumerate(route.sops):
            if sop not in config.sops:
                yield ConfigProblem(shown, f"{base}.sops[{j}]", f"unknown SOP {sop!r}" + suggest(sop, config.sops))
