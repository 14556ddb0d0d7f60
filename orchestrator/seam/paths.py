"""Every construction path that can start (or list) a turn, and the knobs each may use."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from orchestrator.policy import Interactivity

__all__ = ["PATH_PROFILES", "ConstructionPath", "PathProfile", "ScopedAssembly"]


class ConstructionPath(enum.Enum):
    """The construction paths (docs/architecture.md#construction-paths); each enters `resolve()`."""

    CHANNEL = "channel"
    CLI_RUN = "cli_run"
    GATEWAY_CHAT = "gateway_chat"
    LISTING = "listing"
    LIBRARY = "library"
    DELEGATE = "delegate"
    SOP_STEP = "sop_step"
    ACP = "acp"
    SCHEDULE = "schedule"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopedAssembly:
    """Per-site knobs; each can only narrow or withhold what the policy grants."""

    caller_allowed: frozenset[str] | None = None
    connect_mcp: bool = True
    connect_peripherals: bool = True
    exclude_memory: bool = False
    # the turn answers no chat (a schedule without `deliver_to`): `send_file` is withheld
    no_chat: bool = False

    def narrowed_by(self, other: ScopedAssembly) -> ScopedAssembly:
        """Return the knobs that are at least as narrow as both `self` and `other`."""
        if self.caller_allowed is None:
            allowed = other.caller_allowed
        elif other.caller_allowed is None:
            allowed = self.caller_allowed
        else:
            allowed = self.caller_allowed & other.caller_allowed
        return ScopedAssembly(
            caller_allowed=allowed,
            connect_mcp=self.connect_mcp and other.connect_mcp,
            connect_peripherals=self.connect_peripherals and other.connect_peripherals,
            exclude_memory=self.exclude_memory or other.exclude_memory,
            no_chat=self.no_chat or other.no_chat,
        )

    def describe(self) -> dict[str, object]:
        """Return the knobs as plain data (for `orchestrator policy` and the matrix)."""
        return {
            "caller_allowed": sorted(self.caller_allowed) if self.caller_allowed is not None else None,
            "connect_mcp": self.connect_mcp,
            "connect_peripherals": self.connect_peripherals,
            "exclude_memory": self.exclude_memory,
            "no_chat": self.no_chat,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PathProfile:
    """What a path forces on every assembly and how it can reach a human."""

    knobs: ScopedAssembly
    interactivity: Interactivity
    allowed_interactivity: frozenset[Interactivity]
    runs_turns: bool = True
    # the path can bring attachments into a turn (channel messages, gateway, ACP and library uploads)
    carries_media: bool = False
    # the turn can answer a chat a file can be posted to (`send_file` is offered only here,
    # unless the call site withholds it with `no_chat`: a schedule without `deliver_to`)
    has_chat: bool = False


_ANY: Final = frozenset(Interactivity)
_NON: Final = frozenset({Interactivity.NON_INTERACTIVE})

PATH_PROFILES: Final = MappingProxyType(
    {
        ConstructionPath.CHANNEL: PathProfile(
            knobs=ScopedAssembly(),
            interactivity=Interactivity.CHANNEL_PROMPT,
            allowed_interactivity=frozenset({Interactivity.CHANNEL_PROMPT}),
            carries_media=True,
            has_chat=True,
        ),
        ConstructionPath.CLI_RUN: PathProfile(
            knobs=ScopedAssembly(),
            interactivity=Interactivity.NON_INTERACTIVE,
            allowed_interactivity=frozenset(
                {Interactivity.INTERACTIVE, Interactivity.NON_INTERACTIVE}
            ),
        ),
        ConstructionPath.GATEWAY_CHAT: PathProfile(
            knobs=ScopedAssembly(), interactivity=Interactivity.NON_INTERACTIVE, allowed_interactivity=_NON,
            carries_media=True,
        ),
        ConstructionPath.LISTING: PathProfile(
            knobs=ScopedAssembly(connect_peripherals=False),
            interactivity=Interactivity.NON_INTERACTIVE,
            allowed_interactivity=_NON,
            runs_turns=False,
        ),
        ConstructionPath.LIBRARY: PathProfile(
            knobs=ScopedAssembly(),
            interactivity=Interactivity.NON_INTERACTIVE,
            allowed_interactivity=frozenset(
                {Interactivity.INTERACTIVE, Interactivity.NON_INTERACTIVE}
            ),
            carries_media=True,  # `Agent.run(..., attachments=...)`
        ),
        ConstructionPath.DELEGATE: PathProfile(
            knobs=ScopedAssembly(), interactivity=Interactivity.NON_INTERACTIVE, allowed_interactivity=_ANY
        ),
        ConstructionPath.SOP_STEP: PathProfile(
            knobs=ScopedAssembly(), interactivity=Interactivity.NON_INTERACTIVE, allowed_interactivity=_ANY
        ),
        ConstructionPath.ACP: PathProfile(
            knobs=ScopedAssembly(connect_mcp=False, exclude_memory=True),
            interactivity=Interactivity.INTERACTIVE,
            allowed_interactivity=frozenset({Interactivity.INTERACTIVE}),
            carries_media=True,
        ),
        ConstructionPath.SCHEDULE: PathProfile(
            knobs=ScopedAssembly(), interactivity=Interactivity.NON_INTERACTIVE, allowed_interactivity=_NON,
            has_chat=True,  # its `deliver_to` chat; `build_schedule` sets `no_chat` for a schedule without one
        ),
    }
)
