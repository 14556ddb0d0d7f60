"""Cross-checks of `[agents.X] fallback`: every link names a known provider, and no link repeats one."""

from __future__ import annotations

from collections.abc import Iterator

from orchestrator.config import Config
from orchestrator.errors import ConfigProblem
from orchestrator.text import suggest

__all__ = ["check_fallback"]


def check_fallback(config: Config) -> Iterator[ConfigProblem]:
    """Yield one problem per unknown provider (`agents.X.fallback[i].provider`) or repeated link."""
    for name, agent in config.agents.items():
        file = config.origin_of(name)
        seen = {(agent.provider, agent.model): "the agent's own provider and model"}
        for i, link in enumerate(agent.fallback):
            base = f"agents.{name}.fallback[{i}]"
            if link.provider not in config.providers:
                yield ConfigProblem(
                    file, f"{base}.provider",
                    f"unknown provider {link.provider!r}" + suggest(link.provider, config.providers),
                )
            first = seen.setdefault((link.provider, link.model), f"fallback[{i}]")
            if first != f"fallback[{i}]":
                # the SDK's retries already repeat a request: a second link to it only doubles the wait
                yield ConfigProblem(
                    file, base, f"{link.provider!r} / {link.model!r} repeats {first}; list each link once"
                )
