"""ObservedState: what the metrics read of the daemon (its `Runtime` is one), as protocols."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from orchestrator.lifecycle import Lifecycle
from orchestrator.seam import Services
from orchestrator.sessions import Sessions

__all__ = ["ObservedChannel", "ObservedState"]


class ObservedChannel(Protocol):
    """One channel as the metrics see it (the daemon's `ChannelStatus` is one)."""

    @property
    def kind(self) -> str: ...

    @property
    def state(self) -> Lifecycle: ...


class ObservedChannels(Protocol):
    def status(self) -> Mapping[str, ObservedChannel]: ...


class ObservedInbox(Protocol):
    def inbox_depth(self) -> int: ...

    def queued_replies(self) -> int: ...


class ObservedState(Protocol):
    """What the state gauges read of the daemon (its `Runtime` is one); read on every scrape only."""

    @property
    def services(self) -> Services: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def channels(self) -> ObservedChannels: ...

    @property
    def store(self) -> ObservedInbox: ...

    @property
    def replies_given_up(self) -> int: ...
