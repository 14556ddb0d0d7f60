"""A chat message's attachments: the intake through the channel's adapter, the echo, the send_file outlet."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import BinaryIO, Final

from loguru import logger

from channels import Attachment, ChannelAdapter, ChannelError, FileAdapter, Inbound, Outbound, OutboundFile
from orchestrator.media import Incoming, Intake, MediaRefused, check, fetch_failed, take_in
from orchestrator.seam import ResolvedAgentExecution

__all__ = ["ChatFileOutlet", "echo_transcripts", "take_in_chat"]

_ECHO_CHARS: Final = 300


async def take_in_chat(adapter: ChannelAdapter, inbound: Inbound, execution: ResolvedAgentExecution) -> Intake:
    """Check `inbound`'s attachments against the agent's media policy and fetch them through `adapter`.

    Raises `MediaRefused` with the line for the user; the policy is checked before the
    adapter is asked for anything, so a refused attachment is never downloaded. A `pending`
    attachment (a Slack Connect stub) is described by the adapter first, and only for an
    agent that takes some files; a lookup that fails is refused like a failed download.
    """
    policy = execution.media
    attachments = inbound.attachments
    if policy.accept and isinstance(adapter, FileAdapter):  # an agent that takes no files asks nothing
        attachments = tuple([await _described(adapter, a) for a in attachments])
    items = [
        Incoming(kind=a.kind, mime=a.mime, size=a.size, name=a.name, fetch=_fetcher(adapter, a))
        for a in attachments
    ]
    check(policy, items)
    if not isinstance(adapter, FileAdapter):
        raise MediaRefused("This channel cannot fetch files yet; please send the text instead.")
    return await take_in(policy, execution.security, items, text=inbound.text)


async def _described(adapter: FileAdapter, attachment: Attachment) -> Attachment:
    """Return `attachment` with its kind known (a pending one asked of the platform)."""
    if not attachment.pending:
        return attachment
    try:
        return await adapter.describe(attachment)
    except ChannelError as exc:
        logger.info("attachment lookup failed: {}", exc)
        raise fetch_failed(attachment.kind) from exc


def _fetcher(adapter: ChannelAdapter, attachment: Attachment) -> Callable[[BinaryIO, int], Awaitable[int]]:
    async def fetch(dest: BinaryIO, max_bytes: int) -> int:
        if not isinstance(adapter, FileAdapter):  # take_in_chat refuses before any fetch
            raise ChannelError(adapter.name, "this channel cannot fetch files")
        return await adapter.download(attachment, dest, max_bytes=max_bytes)

    return fetch


async def echo_transcripts(adapter: ChannelAdapter, inbound: Inbound, transcripts: tuple[str, ...]) -> None:
    """Quote each transcription back to the chat (best effort: a failed echo never stops the turn)."""
    for spoken in transcripts:
        quote = spoken if len(spoken) <= _ECHO_CHARS else spoken[: _ECHO_CHARS - 1] + "…"
        try:
            await adapter.send(Outbound(chat=inbound.chat, thread=inbound.thread, text=f"🎙️ “{quote}”"))
        except ChannelError as exc:
            logger.warning("could not echo a transcription to {}: {}", inbound.chat, exc)


class ChatFileOutlet:
    """The chat a turn answers, for `send_file`: posts into `inbound`'s chat and thread only."""

    __slots__ = ("_adapter", "_inbound")

    def __init__(self, *, adapter: FileAdapter, inbound: Inbound) -> None:
        self._adapter = adapter
        self._inbound = inbound

    @property
    def max_file_bytes(self) -> int:
        return self._adapter.max_file_bytes

    async def send_file(self, content: io.BufferedReader, *, size: int, name: str, mime: str, caption: str | None) -> str:
        """Post the open file to the chat; raises `ChannelError` when the platform fails or refuses it."""
        file = OutboundFile(
            chat=self._inbound.chat, thread=self._inbound.thread, content=content, size=size, name=name, mime=mime,
            caption=caption,
        )
        return await self._adapter.send_file(file)
