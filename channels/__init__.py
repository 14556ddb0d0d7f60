"""Channel adapters: transport only. Each platform's SDK is imported only when configured."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from channels.approval_codec import (
    APPROVAL_COMMANDS,
    APPROVE_COMMAND,
    DENY_COMMAND,
    SHOW_COMMAND,
    approval_command,
    encode_approval_button,
    parse_approval_button,
    parse_approval_command,
    parse_show_command,
    show_command,
)
from channels.base import (
    Attachment,
    AttachmentKind,
    AttachmentTooLarge,
    FileAdapter,
    OutboundFile,
    ReplyStream,
    StreamingAdapter,
    StreamStatus,
    ApprovalAnswer,
    ApprovalPrompt,
    ChannelAdapter,
    ChannelAuthError,
    ChannelUnusable,
    ChannelEnded,
    IntakeDeferred,
    ChannelError,
    ChannelRateLimited,
    ChannelRefused,
    Deliver,
    Inbound,
    Outbound,
    Ready,
    ReplyProgress,
)
from channels.chunking import chunk_text
from channels.file_kinds import IMAGE_MIMES, acceptable_mime, looks_like
from channels.supervisor import supervise

if TYPE_CHECKING:
    from orchestrator.config import SecretRef

__all__ = [
    "ADAPTERS",
    "IMAGE_MIMES",
    "Attachment",
    "AttachmentKind",
    "AttachmentTooLarge",
    "FileAdapter",
    "OutboundFile",
    "ReplyStream",
    "StreamingAdapter",
    "StreamStatus",
    "APPROVAL_COMMANDS",
    "APPROVE_COMMAND",
    "DENY_COMMAND",
    "SHOW_COMMAND",
    "ApprovalAnswer",
    "ApprovalPrompt",
    "ChannelAdapter",
    "ChannelAuthError",
    "ChannelUnusable",
    "ChannelEnded",
    "IntakeDeferred",
    "ChannelError",
    "ChannelRateLimited",
    "ChannelRefused",
    "Deliver",
    "Inbound",
    "Outbound",
    "Ready",
    "ReplyProgress",
    "SecretResolver",
    "acceptable_mime",
    "approval_command",
    "chunk_text",
    "create_adapter",
    "encode_approval_button",
    "looks_like",
    "parse_approval_button",
    "parse_approval_command",
    "parse_show_command",
    "show_command",
    "supervise",
]

SecretResolver = Callable[["SecretRef"], str]

# kind -> module defining `create(name, config, *, secrets) -> ChannelAdapter`
ADAPTERS: Final = MappingProxyType(
    {
        "telegram": "channels.telegram",
        "slack": "channels.slack",
        "discord": "channels.discord",
        "terminal": "channels.terminal",
    }
)


def create_adapter(name: str, config: Any, *, secrets: SecretResolver) -> ChannelAdapter:
    """Import the adapter module for `config.kind` (only now) and build the adapter."""
    module = importlib.import_module(ADAPTERS[config.kind])
    adapter: ChannelAdapter = module.create(name, config, secrets=secrets)
    return adapter
