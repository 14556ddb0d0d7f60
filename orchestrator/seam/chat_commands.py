"""Chat commands are policy: what the senders a route admits may run from the chat.

Every chat command is authorised by the route that admitted the message, resolved here and
nowhere else (dispatch asks, `orchestrator route` shows, `policy matrix` checks):

- `/new`, `/stop` and `/compact` act only on the sender's own session, `/usage` shows only the
  sender's own usage with the routed agent, and `/help` lists what the route grants: every
  route has them.
- `/approve ID` and `/deny ID` answer only a prompt the sender may answer (`answerers`), and
  `/show ID` (or a prompt's Show all button) sends the whole call only to those same people
  (`may_show`), in the chat the prompt waits in.
- `/sop NAME` starts only an SOP the route lists in `sops` (none by default; an SOP the
  config lacks is never granted, whatever the list says).

An approval asked for a turn of another agent than the routed one (an SOP step's agent)
goes to the route's `approvers` only: the requester reached that agent through an SOP, not
through the route, so the requester alone never decides it; without approvers nobody may.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from channels import APPROVAL_COMMANDS

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.config import RouteConfig

__all__ = [
    "APPROVAL_COMMANDS", "COMPACT_COMMAND", "SESSION_COMMANDS", "SOP_COMMAND", "WHOAMI_COMMAND", "ChatCommands", "resolve_chat_commands",
]

SESSION_COMMANDS: Final = ("/new", "/stop", "/usage", "/help")
# Folds the session's older messages into its summary now; it waits for a running turn.
COMPACT_COMMAND: Final = "/compact"
SOP_COMMAND: Final = "/sop"
# Tells anyone their own platform user id and the chat id (an admitted sender also the route and
# agent); answered even where no route admits the sender, at most once a minute per sender.
WHOAMI_COMMAND: Final = "/whoami"
# `/approve`, `/deny`, `/show`: the approval codec's (`channels/approval_codec.py`), which spells them for every adapter


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatCommands:
    """What one route's senders may run from the chat (made by `resolve_chat_commands`)."""

    agent: str  # the routed agent
    commands: tuple[str, ...]
    sops: tuple[str, ...]
    approvers: frozenset[str]
    # the agents each granted SOP's steps run as, in order of first use
    sop_agents: MappingProxyType[str, tuple[str, ...]]

    def may_start(self, sop: str) -> bool:
        """Return whether `/sop <sop>` from this route may run a step."""
        return sop in self.sops

    def answerers(self, agent: str, requester: str) -> frozenset[str]:
        """Return who may answer an approval for a turn of `agent` that `requester` started here.

        The routed agent's: the requester and the route's approvers. Any other agent's: the
        approvers only (empty when the route has none: nobody may approve it).
        """
        if agent == self.agent:
            return frozenset({requester, *self.approvers})
        return self.approvers

    @staticmethod
    def may_show(answerers: frozenset[str], sender: str) -> bool:
        """Return whether `sender` may see the whole call of a pending approval: exactly the
        people who may answer it (`answerers`, as resolved when it was asked), nobody else."""
        return sender in answerers

    def describe(self, requester: str) -> dict[str, object]:
        """Return the grant for `requester` as plain data (for `orchestrator route --json`)."""
        return {
            "agent": self.agent,
            "approvers": sorted(self.approvers),
            "commands": list(self.commands),
            "sops": {
                name: {
                    "agents": list(agents),
                    "answerers": {agent: sorted(self.answerers(agent, requester)) for agent in agents},
                }
                for name, agents in self.sop_agents.items()
            },
        }


def resolve_chat_commands(config: Config, route: RouteConfig) -> ChatCommands:
    """Resolve what `route`'s senders may run from the chat; a missing `sops` grants no SOP."""
    sops = tuple(name for name in dict.fromkeys(route.sops) if name in config.sops)
    agents = {
        name: tuple(dict.fromkeys(step.agent or config.sops[name].agent for step in config.sops[name].steps))
        for name in sops
    }
    commands = (
        *SESSION_COMMANDS, COMPACT_COMMAND, *((SOP_COMMAND,) if sops else ()), *APPROVAL_COMMANDS, WHOAMI_COMMAND,
    )
    return ChatCommands(
        agent=route.agent,
        commands=commands,
        sops=sops,
        approvers=frozenset(route.approvers),
        sop_agents=MappingProxyType(agents),
    )
