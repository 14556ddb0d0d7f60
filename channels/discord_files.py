"""Discord files: message attachments in, CDN downloads, files posted as multipart messages.

- Inbound: each `discord.Attachment` becomes an `Attachment` (handle = its CDN URL; a voice
  message, recorded in Discord's client, is kind `voice`). The URL is signed and expires (about a
  day): a download long after the message may be refused (404).
- Download: GET the CDN URL, no credentials (the bot token never goes to the CDN). Only
  Discord's CDN hosts, or the host of the configured `api_base_url` (a loopback Discord), are
  fetched; any other URL is refused without a request.
- Upload: one `channel.send(file=discord.File(...))`, which discord.py posts as multipart
  (`payload_json` + `files[0]`), the caption as the message content; a caption longer than
  a message holds continues in follow-up messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, BinaryIO, Final

import aiohttp
import discord

from channels.attachments import FileHosts, download_from
from channels.base import Attachment, ChannelRefused, OutboundFile
from channels.chunking import chunk_text
from channels.file_kinds import guess_mime, kind_for_mime

__all__ = ["CDN_HOSTS", "MAX_FILE_BYTES", "attachments_of", "download", "post_file"]

# Discord's default upload limit for a bot (servers with boosts allow more; a bot cannot know
# in advance, and a post over the channel's limit is refused with 413 / 40005).
MAX_FILE_BYTES: Final = 10 * 1024 * 1024
CDN_HOSTS: Final = frozenset({"cdn.discordapp.com", "media.discordapp.net"})

Call = Callable[[str, Awaitable[Any]], Awaitable[Any]]


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """Return the attachments of `message` as the core sees them (nothing downloaded)."""
    found: list[Attachment] = []
    for item in message.attachments:
        mime = guess_mime(item.content_type, item.filename)
        found.append(
            Attachment(
                kind=kind_for_mime(mime, voice=item.is_voice_message()),
                mime=mime,
                handle=item.url,
                size=item.size if item.size >= 0 else None,
                name=item.filename or None,
            )
        )
    return tuple(found)


async def download(
    attachment: Attachment,
    dest: BinaryIO,
    *,
    channel: str,
    api_base: str | None,
    max_bytes: int,
    idle_timeout_s: float,
) -> int:
    """Stream the attachment's CDN URL into the open file `dest`; see `FileAdapter.download` for the contract."""
    hosts = FileHosts(names=CDN_HOSTS, api_base=api_base, what="a Discord CDN URL")
    async with aiohttp.ClientSession() as session:
        return await download_from(
            session, hosts, attachment.handle, dest, channel=channel, max_bytes=max_bytes, idle_timeout_s=idle_timeout_s
        )


async def post_file(
    target: discord.abc.Messageable, file: OutboundFile, *, channel: str, call: Call, max_chars: int
) -> str:
    """Post `file` (and its caption) to `target`; return the id of the message holding the file.

    Raises `ChannelRefused` when the file is over `MAX_FILE_BYTES` (checked before any upload);
    the bytes are the open file the core checked, never re-opened by path; the adapter's `call`
    translates what Discord answers.
    """
    size = file.size
    if size > MAX_FILE_BYTES:
        raise ChannelRefused(
            channel, f"send_file: {file.name!r} is {size} bytes; Discord takes at most {MAX_FILE_BYTES} from a bot"
        )
    chunks: Sequence[str] = chunk_text(file.caption, max_chars) if file.caption else ()
    file.content.seek(0)
    upload = discord.File(file.content, filename=file.name)
    try:
        message = await call("post a file", target.send(chunks[0] if chunks else None, file=upload))
    finally:
        upload.close()
    for chunk in chunks[1:]:
        await call("send a message", target.send(chunk))
    return str(message.id)
