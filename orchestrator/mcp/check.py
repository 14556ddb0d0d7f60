"""The doctor's MCP part: connect every server once, show what it offers, check the bundles."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TextIO

from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.mcp.connection import Backoff
from orchestrator.mcp.errors import McpServerUnavailable
from orchestrator.mcp.offer import ServerOffer
from orchestrator.mcp.pool import McpPool
from orchestrator.mcp.naming import unusable_reason
from orchestrator.policy import matches_any
from orchestrator.text import suggest

__all__ = ["McpProbe", "bundle_problems", "probe_mcp"]

_GLOB_CHARS: Final = frozenset("*?[")
_SHOWN_NAMES: Final = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class McpProbe:
    """What connecting every server once found: each offer (None = did not connect), problems, warnings."""

    offers: Mapping[str, ServerOffer | None]
    problems: tuple[ConfigProblem, ...]
    warnings: tuple[ConfigProblem, ...]


async def probe_mcp(config: Config, *, shown: str, out: TextIO, connect_timeout_s: float = 30.0) -> McpProbe:
    """Connect every server once and print its offer to `out`; return what failed or matches nothing."""
    problems: list[ConfigProblem] = []
    # One attempt per server: a check reports, it does not wait out a backoff.
    async with McpPool(config, connect_timeout_s=connect_timeout_s, backoff=Backoff(base_s=3600)) as pool:
        try:
            await pool.ensure_connected(config.mcp.servers)
        except McpServerUnavailable as exc:
            for server, reason in exc.failures:
                problems.append(ConfigProblem(shown, f"mcp.servers.{server}", f"cannot connect: {reason}"))
        offers = {name: pool.offer(name, None) for name in config.mcp.servers}
    warnings: list[ConfigProblem] = []
    for name, offer in offers.items():
        if offer is not None:
            _print_offer(name, config.mcp.servers[name].transport, offer, out)
            for granted, problem in _unusable(config, name, offer, shown):
                (problems if granted else warnings).append(problem)
    problems.extend(bundle_problems(config, offers, shown=shown))
    return McpProbe(offers=MappingProxyType(offers), problems=tuple(problems), warnings=tuple(warnings))


def bundle_problems(
    config: Config, offers: dict[str, ServerOffer | None], *, shown: str
) -> list[ConfigProblem]:
    """Return one problem per bundle tool or pinned-resource glob matching nothing a server offers."""
    problems: list[ConfigProblem] = []
    for name, bundle in config.mcp.bundles.items():
        for server, patterns in bundle.tools.items():
            offer = offers.get(server)
            if offer is None:
                continue  # unreachable servers are reported on their own
            names = [t.name for t in offer.tools]
            for i, pattern in enumerate(patterns):
                if any(matches_any(n, (pattern,)) for n in names):
                    continue
                what = "pattern" if _GLOB_CHARS & set(pattern) else "tool"
                problems.append(
                    ConfigProblem(
                        shown,
                        f"mcp.bundles.{name}.tools.{server}[{i}]",
                        f"{what} {pattern!r} matches no tool of MCP server {server!r}"
                        + suggest(pattern, names),
                    )
                )
        for server, entries in bundle.pinned_resources.items():
            offer = offers.get(server)
            if offer is None:
                continue
            uris = [r.uri for r in offer.resources]
            for i, entry in enumerate(entries):
                if _GLOB_CHARS & set(entry) and not any(matches_any(u, (entry,)) for u in uris):
                    problems.append(
                        ConfigProblem(
                            shown,
                            f"mcp.bundles.{name}.pinned_resources.{server}[{i}]",
                            f"pattern {entry!r} matches no resource of MCP server {server!r}",
                        )
                    )
    return problems


def _unusable(config: Config, server: str, offer: ServerOffer, shown: str) -> Iterator[tuple[bool, ConfigProblem]]:
    """Yield (granted by a bundle, problem) for each tool the server offers that no model can use.

    A tool some bundle grants is a problem (the admin asked for something that cannot work);
    one nobody grants is only a warning: the server merely offers it.
    """
    patterns = [p for bundle in config.mcp.bundles.values() for p in bundle.tools.get(server, ())]
    for tool in offer.tools:
        reason = unusable_reason(server, tool)
        if reason is not None:
            granted = matches_any(tool.name, patterns)
            yield granted, ConfigProblem(shown, f"mcp.servers.{server}", f"tool {tool.name!r} cannot be offered: {reason}")


def _print_offer(server: str, transport: str, offer: ServerOffer, out: TextIO) -> None:
    read_only = sum(1 for t in offer.tools if t.read_only)
    print(
        f"mcp server {server} ({transport}): {len(offer.tools)} tools ({read_only} read-only), "
        f"{len(offer.resources)} resources",
        file=out,
    )
    names = [t.name for t in offer.tools]
    if names:
        more = f", ... ({len(names) - _SHOWN_NAMES} more)" if len(names) > _SHOWN_NAMES else ""
        print(f"  tools: {', '.join(names[:_SHOWN_NAMES])}{more}", file=out)
    uris = [r.uri for r in offer.resources]
    if uris:
        more = f", ... ({len(uris) - _SHOWN_NAMES} more)" if len(uris) > _SHOWN_NAMES else ""
        print(f"  resources: {', '.join(uris[:_SHOWN_NAMES])}{more}", file=out)
