"""Slack files: file objects on message events, `url_private` downloads, the v2 external upload.

- Inbound: each entry of an event's `files` becomes an `Attachment` (handle = `url_private`).
  Files Slack does not host (`is_external`: Google Drive and other remote files, whose
  `url_private` may point anywhere) and deleted ones (`mode = "tombstone"`) are left out.
  In Slack Connect channels an entry can be a stub, only an id with `file_access =
  "check_file_info"`: it is a `pending` attachment, and `describe` asks `files.info` (scope
  `files:read`) for the whole object, only when the core wants the file (an agent that takes
  none never causes the call). `file_access = "access_denied"` is a pending attachment
  `describe` refuses without a call.
- Download: GET `url_private` with the bot token as bearer (scope `files:read`; without it
  Slack answers with its sign-in page, which is refused rather than saved). The token is
  only ever sent to Slack's file host, or to the host of the configured `api_base_url` (a
  self-hosted or loopback Slack); any other URL is refused without a request.
- Upload: `files.getUploadURLExternal`, the bytes POSTed to the returned URL (streamed from
  the open file the core checked, never re-opened by path; no token: the URL is pre-signed), then `files.completeUploadExternal` shares it in the
  chat or thread (scope `files:write`). slack_sdk's `files_upload_v2` does the same three steps
  (and works against a loopback base URL, since the upload URL comes from the API) but reads
  the whole file into memory first, so the middle step is ours.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import aiohttp

from channels.attachments import FileHosts, download_from
from channels.base import Attachment, ChannelAuthError, ChannelError, ChannelRefused, OutboundFile
from channels.file_kinds import guess_mime, kind_for_mime
from orchestrator.threads import in_thread

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

__all__ = ["MAX_FILE_BYTES", "SLACK_FILE_HOSTS", "attachments_from_event", "describe", "download", "upload"]

MAX_FILE_BYTES: Final = 1024 * 1024 * 1024  # Slack's per-file upload limit (1 GB)
SLACK_FILE_HOSTS: Final = frozenset({"files.slack.com"})
_VOICE_SUBTYPES: Final = frozenset({"slack_audio"})  # a clip recorded in Slack's composer
_STUB_ACCESS: Final = frozenset({"check_file_info", "access_denied"})
_FILE_ID: Final = re.compile(r"F[A-Z0-9]{2,40}")
_DENIED: Final = "access_denied:"
_UNKNOWN_MIME: Final = "application/octet-stream"
_UPLOAD_TIMEOUT_S: Final = 300.0
_UPLOAD_CHUNK: Final = 256 * 1024

ApiCall = Callable[[str, Awaitable[Any]], Awaitable[Any]]


def attachments_from_event(event: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """Return the attachments of a `message` / `app_mention` event's `files` (none: empty).

    A Slack Connect stub (`file_access = "check_file_info"`, only an id) is a `pending`
    attachment that `describe` looks up with `files.info`; one the app may not see
    (`file_access = "access_denied"`) is a pending attachment `describe` refuses, so the
    sender hears that the file could not be fetched instead of nothing.
    """
    files = event.get("files")
    if not isinstance(files, list):
        return ()
    found: list[Attachment] = []
    for item in files:
        if not isinstance(item, Mapping):
            continue
        attachment = _attachment_of(item) or _stub_of(item)
        if attachment is not None:
            found.append(attachment)
    return tuple(found)


def _attachment_of(item: Mapping[str, Any]) -> Attachment | None:
    """Return the attachment a full file object describes; None for what Slack does not host."""
    if item.get("is_external") or item.get("mode") == "tombstone":
        return None
    url = item.get("url_private")
    if not isinstance(url, str) or not url:
        return None
    name = item.get("name") if isinstance(item.get("name"), str) else None
    mimetype = item.get("mimetype") if isinstance(item.get("mimetype"), str) else None
    mime = guess_mime(mimetype, name or _filetype_name(item))
    size = item.get("size")
    return Attachment(
        kind=kind_for_mime(mime, voice=item.get("subtype") in _VOICE_SUBTYPES),
        mime=mime,
        handle=url,
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        name=name,
    )


def _stub_of(item: Mapping[str, Any]) -> Attachment | None:
    """Return a pending attachment for a Slack Connect stub (only an id); None for anything else."""
    file_id, access = item.get("id"), item.get("file_access")
    if not isinstance(file_id, str) or not _FILE_ID.fullmatch(file_id) or access not in _STUB_ACCESS:
        return None
    handle = file_id if access == "check_file_info" else f"{_DENIED}{file_id}"
    return Attachment(kind="document", mime=_UNKNOWN_MIME, handle=handle, pending=True)


async def describe(client: AsyncWebClient, attachment: Attachment, *, channel: str, api: ApiCall) -> Attachment:
    """Return a pending attachment as `files.info` describes it (others as they are).

    Raises `ChannelRefused` when the file is not shared with the app (`access_denied`),
    Slack does not know it (`file_not_found`), the token lacks `files:read`, or the answer
    still holds no file Slack hosts; `ChannelError` when the call fails in a way a retry may fix.
    """
    if not attachment.pending:
        return attachment
    if attachment.handle.startswith(_DENIED):
        file_id = attachment.handle.removeprefix(_DENIED)
        raise ChannelRefused(channel, f"files.info: {file_id} is not shared with this app (file_access = access_denied)")
    try:
        answer = await api("files.info", client.files_info(file=attachment.handle))
    except ChannelAuthError as exc:  # missing_scope: this file is refused, the channel itself works
        raise ChannelRefused(channel, f"{exc.reason} (does the app have files:read?)") from exc
    item = answer.get("file")
    described = _attachment_of(item) if isinstance(item, Mapping) else None
    if described is None:
        raise ChannelRefused(channel, f"files.info: Slack gave no file it hosts for {attachment.handle}")
    return described


def _filetype_name(item: Mapping[str, Any]) -> str | None:
    """Return a stand-in file name from Slack's `filetype` (`pdf`, `png`) for guessing a type."""
    filetype = item.get("filetype")
    return f"file.{filetype}" if isinstance(filetype, str) and filetype.isalnum() else None


async def download(
    session: aiohttp.ClientSession,
    attachment: Attachment,
    dest: BinaryIO,
    *,
    channel: str,
    bot_token: str,
    api_base_url: str | None,
    max_bytes: int,
    idle_timeout_s: float,
) -> int:
    """Stream `attachment.handle` (a `url_private`) into `dest` with the bot token; see the module."""
    hosts = FileHosts(names=SLACK_FILE_HOSTS, api_base=api_base_url, what="a Slack file URL")
    return await download_from(
        session, hosts, attachment.handle, dest, channel=channel, max_bytes=max_bytes, idle_timeout_s=idle_timeout_s,
        headers={"Authorization": f"Bearer {bot_token}"},
        check=lambda response: _refused_by_slack(response, attachment, channel),
    )


def _refused_by_slack(response: aiohttp.ClientResponse, attachment: Attachment, channel: str) -> None:
    """Name the likely cause when Slack will not hand over a file: the token or its scope."""
    if 300 <= response.status < 400:  # Slack sends a token it does not accept to its sign-in page
        raise ChannelRefused(
            channel, f"download: HTTP {response.status}: Slack redirected instead of sending the file "
            "(the bot token was not accepted; does the app have files:read?)"
        )
    if response.status in (401, 403):
        raise ChannelRefused(
            channel, f"download: HTTP {response.status}: Slack refused the bot token (does the app have files:read?)"
        )
    # A token without files:read gets the workspace's sign-in page instead of the file, as HTTP 200.
    if response.status == 200 and response.content_type == "text/html" and attachment.mime != "text/html":
        raise ChannelRefused(channel, "download: Slack sent a sign-in page, not the file (does the app have files:read?)")


async def upload(
    client: AsyncWebClient,
    session: aiohttp.ClientSession,
    file: OutboundFile,
    *,
    channel: str,
    api: ApiCall,
    initial_comment: str | None,
) -> str:
    """Share `file` in its chat through the v2 external upload flow; return the file id.

    Slack shares the file into the chat asynchronously, so the message's `ts` is not known
    when `files.completeUploadExternal` returns; the file id names what was posted.
    Raises `ChannelRefused` for a file over Slack's limit or an API refusal (`not_in_channel`,
    `channel_not_found`), `ChannelError` when an upload step fails in a way a retry may fix.
    """
    length = file.size
    if length > MAX_FILE_BYTES:
        raise ChannelRefused(channel, f"send_file: {file.name!r} is {length} bytes; Slack takes at most {MAX_FILE_BYTES}")
    if length == 0:
        raise ChannelRefused(channel, f"send_file: {file.name!r} is empty; Slack refuses empty uploads")
    ticket = await api(
        "files.getUploadURLExternal", client.files_getUploadURLExternal(filename=file.name, length=length)
    )
    upload_url, file_id = ticket.get("upload_url"), ticket.get("file_id")
    if not isinstance(upload_url, str) or not isinstance(file_id, str):
        raise ChannelError(channel, "files.getUploadURLExternal: no upload_url / file_id in the answer")
    await _post_bytes(session, upload_url, file, length, channel=channel)
    await api(
        "files.completeUploadExternal",
        client.files_completeUploadExternal(
            files=[{"id": file_id, "title": file.name}],
            channel_id=file.chat,
            thread_ts=file.thread,
            initial_comment=initial_comment,
        ),
    )
    return file_id


async def _post_bytes(session: aiohttp.ClientSession, url: str, file: OutboundFile, length: int, *, channel: str) -> None:
    timeout = aiohttp.ClientTimeout(total=_UPLOAD_TIMEOUT_S)
    try:
        headers = {"Content-Type": file.mime, "Content-Length": str(length)}
        body = _chunks(file, length, channel=channel)
        async with session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False) as response:
            text = await response.text(errors="replace")
            status = response.status
    except TimeoutError as exc:
        raise ChannelError(channel, f"send_file: the upload took over {_UPLOAD_TIMEOUT_S:g}s") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise ChannelError(channel, f"send_file: upload failed: {type(exc).__name__}: {exc}") from exc
    if status == 200:
        return
    reason = f"send_file: the upload URL answered HTTP {status} {text[:200]}".rstrip()
    if 400 <= status < 500 and status != 429:
        raise ChannelRefused(channel, reason)
    raise ChannelError(channel, reason)


async def _chunks(file: OutboundFile, length: int, *, channel: str) -> AsyncIterator[bytes]:
    """Yield the open file's bytes by offset (`pread`: the file is neither re-opened nor closed, so a retry can read it again)."""
    offset = 0
    while offset < length:
        chunk = await in_thread(os.pread, file.content.fileno(), min(_UPLOAD_CHUNK, length - offset), offset)
        if not chunk:
            raise ChannelError(channel, f"send_file: {file.name!r} shrank while being sent")
        offset += len(chunk)
        yield chunk
