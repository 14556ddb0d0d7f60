"""The daemon: channels in, turns through the seam, replies out; one job per module.

`runtime` (the container), `channels` (a `ChannelSet` of supervised adapters), `admission`
and `inbox` (routing, the durable inbox, `process_message`), `turns` (a chat message's turn
through `Sessions.run_turn`), `commands` (the chat commands table), `approvals` (asking in
the chat), `replies` (the reply protocol), `serving` (`orchestrator run`), `routing`,
`pairing` (strangers' codes in the chat) and `pairing_admin` (`orchestrator pairing`),
`rate_limits` (the slow-down line), `secrets`, `systemd`, `status` (the status document), `status_socket` (where `orchestrator status`
asks the daemon; the client is `orchestrator.status_client`).
"""

from orchestrator.daemon.admission import Admitted, Disposition, admit
from orchestrator.daemon.approvals import ChannelApprover, answer_approval
from orchestrator.daemon.channels import Channel, ChannelSet, ChannelState, ChannelStatus
from orchestrator.daemon.collector import freeze_start_up
from orchestrator.daemon.inbox import (
    deliver,
    hold_replayed,
    process_message,
    replay_unfinished,
    start_channel,
    start_channels,
    stop_channel,
)
from orchestrator.daemon.pairing_admin import paired_routes, run_pairing_admin
from orchestrator.daemon.replies import deliver_reply, fit_reply, resume_reply
from orchestrator.daemon.routing import RouteMatch, explain_route, match_route, session_key, shadow_problems, shadowed_routes
from orchestrator.daemon.runtime import Reloadable, Runtime
from orchestrator.daemon.secrets import channel_secret_problems
from orchestrator.daemon.serving import reload_config, run_daemon, serve
from orchestrator.daemon.status import SCHEMA_VERSION, build_status
from orchestrator.daemon.status_socket import serve_status_socket

__all__ = [
    "Admitted",
    "Channel",
    "ChannelApprover",
    "ChannelSet",
    "ChannelState",
    "ChannelStatus",
    "Disposition",
    "Reloadable",
    "RouteMatch",
    "Runtime",
    "SCHEMA_VERSION",
    "admit",
    "answer_approval",
    "build_status",
    "channel_secret_problems",
    "deliver",
    "deliver_reply",
    "explain_route",
    "fit_reply",
    "freeze_start_up",
    "match_route",
    "paired_routes",
    "process_message",
    "reload_config",
    "hold_replayed",
    "replay_unfinished",
    "resume_reply",
    "run_daemon",
    "run_pairing_admin",
    "serve",
    "serve_status_socket",
    "session_key",
    "shadow_problems",
    "shadowed_routes",
    "start_channel",
    "start_channels",
    "stop_channel",
]
