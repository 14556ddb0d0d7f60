"""Telegram attachments: what a message carries (`attachments_of`), fetching one, posting a file.

Kept apart from the adapter's text path: `attachments_of` turns a photo, document, voice
note, audio file or video note into `Attachment`s (the handle is the `file_id`);
`download` asks `getFile` for the file's path and streams it from the file endpoint under
the caller's cap; `send_file` posts with `sendPhoto` (an image Telegram can show inline)
or `sendDocument`, both multipart uploads.

`sendPhoto` takes a JPEG, PNG, GIF or WebP of at most 10 MB whose width plus height is at most
10,000 and whose sides differ at most twentyfold (the Bot API's own rules); the size is read from
the image's header (`channels.image_size`) before sending, and an image that breaks a rule, or
whose header cannot be read, goes as a document instead (a long phone screenshot, 1080x25000, is
one). A photo Telegram still refuses for what it is (`PHOTO_INVALID_DIMENSIONS` and the like) is
sent again as a document, so the file reaches the chat either way.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import BinaryIO, Final, TypeVar

from telegram import Bot, InputFile, Message
from loguru import logger
from telegram.error import BadRequest, NetworkError

from channels.base import Attachment, AttachmentTooLarge, ChannelError, ChannelRefused, OutboundFile
from channels.image_size import pixel_size
from channels.telegram_http import AiohttpRequest, DownloadTooLarge, stream_download
from orchestrator.threads import in_thread

__all__ = ["MAX_DOWNLOAD_BYTES", "MAX_FILE_BYTES", "attachments_of", "download", "send_file"]

T = TypeVar("T")
Call = Callable[[str, Callable[[], Awaitable[T]]], Awaitable[T]]

MAX_FILE_BYTES: Final = 50_000_000  # what a bot may upload (sendDocument)
MAX_DOWNLOAD_BYTES: Final = 20_000_000  # what getFile serves to a bot
_MAX_PHOTO_BYTES: Final = 10_000_000  # sendPhoto's own limit; larger images go as documents
_PHOTO_MIMES: Final = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
_MAX_PHOTO_SIDES: Final = 10_000  # sendPhoto: width + height
_MAX_PHOTO_RATIO: Final = 20  # sendPhoto: the longer side over the shorter
# What Telegram answers a photo it will not take as one (its own error names); a document it takes.
# (PHOTO_INVALID covers PHOTO_INVALID_DIMENSIONS.)
_PHOTO_REFUSALS: Final = ("PHOTO_INVALID", "PHOTO_SAVE_FILE_INVALID", "PHOTO_EXT_INVALID", "IMAGE_PROCESS_FAILED")
_DOWNLOAD_TIMEOUT_S: Final = 60.0
_MAX_CAPTION: Final = 1024


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """Return the files `message` carries (the largest size of a photo), in a fixed order."""
    found: list[Attachment] = []
    if message.photo:
        best = message.photo[-1]  # Telegram lists the sizes smallest first
        found.append(Attachment(kind="image", mime="image/jpeg", handle=best.file_id, size=best.file_size,
                                name=f"photo-{best.file_unique_id}.jpg"))
    if message.document is not None:
        doc = message.document
        found.append(Attachment(kind="document", mime=doc.mime_type or "application/octet-stream",
                                handle=doc.file_id, size=doc.file_size, name=doc.file_name))
    if message.voice is not None:
        voice = message.voice
        found.append(Attachment(kind="voice", mime=voice.mime_type or "audio/ogg", handle=voice.file_id,
                                size=voice.file_size, name=f"voice-{voice.file_unique_id}.ogg"))
    if message.audio is not None:
        audio = message.audio
        found.append(Attachment(kind="audio", mime=audio.mime_type or "audio/mpeg", handle=audio.file_id,
                                size=audio.file_size, name=audio.file_name))
    if message.video_note is not None:
        note = message.video_note
        found.append(Attachment(kind="video", mime="video/mp4", handle=note.file_id, size=note.file_size,
                                name=f"video-note-{note.file_unique_id}.mp4"))
    return tuple(found)


async def download(
    channel: str, bot: Bot, request: AiohttpRequest, call: Call[object], attachment: Attachment, dest: BinaryIO,
    *, max_bytes: int,
) -> int:
    """Stream `attachment` into the open file `dest`; raises `AttachmentTooLarge` past `max_bytes`, else `ChannelError`."""
    limit = min(max_bytes, MAX_DOWNLOAD_BYTES)
    if attachment.size is not None and attachment.size > limit:
        raise AttachmentTooLarge(channel, f"the file is {attachment.size} bytes; the limit is {limit}")
    file = await call("getFile", functools.partial(bot.get_file, attachment.handle))
    url = getattr(file, "file_path", None)
    if not isinstance(url, str) or not url:
        raise ChannelError(channel, "getFile: Telegram gave no file path")
    try:
        return await stream_download(request, url, dest, max_bytes=limit, timeout_s=_DOWNLOAD_TIMEOUT_S)
    except DownloadTooLarge as exc:
        raise AttachmentTooLarge(channel, f"file download: {exc}") from exc
    except NetworkError as exc:  # TimedOut included; the text is token-free
        raise ChannelError(channel, f"file download: {exc.message}") from exc


async def send_file(channel: str, bot: Bot, call: Call[Message], file: OutboundFile) -> str:
    """Post `file` to its chat (sendPhoto for an inline-showable image, else sendDocument); return the message id.

    The bytes are read from the open file the core checked (at most its checked size), never from a path.
    """
    data = await in_thread(os.pread, file.content.fileno(), file.size + 1, 0)
    if len(data) != file.size:
        raise ChannelRefused(channel, f"send_file: {file.name!r} changed size while being sent")
    chat: int | str = int(file.chat) if file.chat.lstrip("-").isdigit() else file.chat
    thread = int(file.thread) if file.thread else None
    caption = file.caption[:_MAX_CAPTION] if file.caption else None
    upload = InputFile(data, filename=file.name, attach=False)
    document = functools.partial(bot.send_document, chat_id=chat, document=upload, caption=caption,
                                 message_thread_id=thread)
    if file.mime in _PHOTO_MIMES and _photo_fits(data):
        photo = functools.partial(bot.send_photo, chat_id=chat, photo=upload, caption=caption, message_thread_id=thread)
        try:
            message = await call("sendPhoto", photo)
        except ChannelRefused as exc:
            if not _refused_as_photo(exc):
                raise
            logger.info("channel {}: Telegram refused {!r} as a photo ({}); sending it as a document",
                        channel, file.name, exc.reason)
            message = await call("sendDocument", document)
    else:
        message = await call("sendDocument", document)
    return str(message.message_id)


def _photo_fits(data: bytes) -> bool:
    """Return True when `data` is an image `sendPhoto` takes: at most 10 MB, sides within its rules."""
    if len(data) > _MAX_PHOTO_BYTES:
        return False
    size = pixel_size(data)
    if size is None:  # not an image Telegram could show either
        return False
    width, height = size
    return width + height <= _MAX_PHOTO_SIDES and max(width, height) <= _MAX_PHOTO_RATIO * min(width, height)


def _refused_as_photo(exc: ChannelRefused) -> bool:
    cause = exc.__cause__
    return isinstance(cause, BadRequest) and any(name.lower() in cause.message.lower() for name in _PHOTO_REFUSALS)
