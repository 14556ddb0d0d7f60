"""`multipart/form-data` on `POST /api/agents/{a}/messages`: each file part streamed to disk under the agent's caps.

A form carries the fields `text` and `session` and up to ten file parts, each named by its
kind (`image`, `document`, `voice`, `audio`, `video`) with its `filename` and
`Content-Type`. Every file part is checked against the agent's resolved media policy from
its headers alone, before a byte of it is read (an agent without `media` is refused at the
first part), then streamed into a hidden staging folder of the agent's workspace with
`max_bytes` (per file), `max_message_bytes` (the form's files together) and the room
`workspace_max_bytes` leaves enforced while reading: past a cap the request is refused 413
(past the workspace's room, 422 with the intake's line) and nothing is kept. The staging folder and
its files are made beneath the workspace's descriptor (`WorkspaceDir`: no link followed,
files created with `O_EXCL`) and held open; the intake copies from those open files, never
from a path. What was staged goes through the same intake (`take_in`) as every path, then
the staging folder is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Final

from aiohttp import BodyPartReader, hdrs, web
from aiohttp.http_exceptions import BadHttpMessage, InvalidHeader

from loguru import logger

from channels import AttachmentTooLarge
from orchestrator.media import DOWNLOAD_TIMEOUT_S, UPLOADS_DIR, Incoming, MediaPolicy, MediaRefused, check
from orchestrator.threads import in_thread
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir, copy_file, workspace_usage

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["FORM_CONTENT_TYPE", "Form", "staged_form"]

FORM_CONTENT_TYPE: Final = "multipart/form-data"
_KINDS: Final = frozenset({"image", "document", "voice", "audio", "video"})
_FIELDS: Final = frozenset({"text", "session"})
_MAX_ATTACHMENTS: Final = 10
_CHUNK: Final = 64 * 1024
_UNWRITABLE: Final = "I could not store that file (the workspace is not writable)."  # the intake's line
_FULL: Final = "I could not store that file: the agent's workspace is full."  # the intake's line
_CONTROL_IN_HEADER: Final = "a part's header holds a control character or NUL"


@dataclass(frozen=True, slots=True, kw_only=True)
class Form:
    """A read form: its fields (None when absent) and its files, staged and ready for the intake."""

    text: str | None
    session: str | None
    items: tuple[Incoming, ...]


@contextlib.asynccontextmanager
async def staged_form(
    request: web.Request, policy: MediaPolicy, security: SecurityPolicy, *, max_field_bytes: int
) -> AsyncIterator[Form]:
    """Read the request's form, staging its files; the staging folder is removed on exit, whatever happened.

    Raises `MediaRefused` for a file part the policy refuses (read no further),
    `HTTPRequestEntityTooLarge` past a cap, `HTTPRequestTimeout` when the upload takes longer
    than `DOWNLOAD_TIMEOUT_S`, and `HTTPBadRequest` for a malformed form.
    """
    folder = f"{UPLOADS_DIR}/.incoming-{secrets.token_hex(6)}"
    try:
        workspace = WorkspaceDir.open(security.workspace)
    except OSError as exc:
        logger.warning("cannot stage an upload in {}: {}", security.workspace, exc)
        raise MediaRefused(_UNWRITABLE) from exc
    staged: list[BinaryIO] = []
    try:
        try:
            async with asyncio.timeout(DOWNLOAD_TIMEOUT_S):
                room = await in_thread(workspace_usage(security.workspace).room, security.workspace_max_bytes)
                form = await _read(request, policy, workspace, folder, staged, max_field_bytes, room)
        except TimeoutError:
            raise web.HTTPRequestTimeout(
                text=f"the upload took longer than {DOWNLOAD_TIMEOUT_S:.0f} s; nothing was kept"
            ) from None
        except ValueError as exc:  # aiohttp's reader: a broken boundary, headers or length
            raise web.HTTPBadRequest(text=f"the multipart body is malformed: {exc}") from None
        except BadHttpMessage as exc:  # aiohttp's header parser: never the raw bytes back, never a 500
            reason = _CONTROL_IN_HEADER if isinstance(exc, InvalidHeader) else "a part's headers cannot be read"
            raise web.HTTPBadRequest(text=f"the multipart body is malformed: {reason}") from None
        except ConnectionError:  # the client went away mid-upload: nobody to answer, nothing kept
            logger.info("gateway: a multipart upload to {} was cut off", request.path)
            raise web.HTTPBadRequest(text="the upload was cut off") from None
        yield form
    finally:
        for handle in staged:
            handle.close()
        with contextlib.suppress(OSError, UnsafeEntry):
            await in_thread(workspace.remove_tree, folder)
        workspace.close()


async def _read(
    request: web.Request, policy: MediaPolicy, workspace: WorkspaceDir, folder: str, staged: list[BinaryIO],
    max_field_bytes: int, room: int | None,
) -> Form:
    reader = await request.multipart()
    fields: dict[str, str] = {}
    items: list[Incoming] = []
    left = policy.max_message_bytes
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise web.HTTPBadRequest(text="nested multipart bodies are not accepted")
        name = part.name
        if any(_is_control(value) for value in (name, part.filename)):  # decoded (`filename*=`) ones too
            raise web.HTTPBadRequest(text=f"the multipart body is malformed: {_CONTROL_IN_HEADER}")
        if part.filename is None:
            if name not in _FIELDS or name in fields:
                raise web.HTTPBadRequest(
                    text=f"unexpected form field {name!r}: a form takes 'text', 'session' and file parts"
                )
            fields[name] = await _field(part, name, max_field_bytes)
            continue
        if name not in _KINDS:
            raise web.HTTPBadRequest(
                text=f"a file part is named by its kind (one of {', '.join(sorted(_KINDS))}), not {name!r}"
            )
        if len(items) == _MAX_ATTACHMENTS:
            raise web.HTTPBadRequest(text=f"a form carries at most {_MAX_ATTACHMENTS} files")
        mime = part.headers.get(hdrs.CONTENT_TYPE, "application/octet-stream")
        # the part's headers alone decide whether the policy takes it: nothing is read before
        check(policy, [Incoming(kind=name, mime=mime, name=part.filename, fetch=_unread)])
        try:
            await in_thread(workspace.make_dirs, folder)
            handle = await in_thread(workspace.create, f"{folder}/{len(items)}", readable=True)
        except (OSError, UnsafeEntry) as exc:
            logger.warning("cannot stage an upload in {}: {}", workspace.root, exc)
            raise MediaRefused(_UNWRITABLE) from exc
        staged.append(handle)
        per_file = left >= policy.max_bytes
        cap = min(policy.max_bytes, left)
        if room is not None and room < cap:  # `workspace_max_bytes`: staging is a daemon write too
            cap = room
            if room <= 0:
                raise MediaRefused(_FULL)
        try:
            size, digest = await _stream(part, handle, cap, per_file=per_file)
        except web.HTTPRequestEntityTooLarge:
            if room is not None and cap == room:
                raise MediaRefused(_FULL) from None
            raise
        left -= size
        room = None if room is None else room - size
        items.append(Incoming(kind=name, mime=mime, size=size, name=part.filename, fetch=_copied(handle), digest=digest))
    return Form(text=fields.get("text"), session=fields.get("session"), items=tuple(items))


def _is_control(value: str | None) -> bool:
    return value is not None and any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value)


async def _field(part: BodyPartReader, name: str, max_bytes: int) -> str:
    data = bytearray()
    while chunk := await part.read_chunk(_CHUNK):
        data.extend(chunk)
        if len(data) > max_bytes:
            raise web.HTTPRequestEntityTooLarge(
                max_bytes, len(data), text=f"the form field {name!r} is over {max_bytes:,} bytes"
            )
    try:
        return data.decode(part.get_charset(default="utf-8"))
    except (LookupError, UnicodeDecodeError):
        raise web.HTTPBadRequest(text=f"the form field {name!r} is not valid text") from None


async def _stream(part: BodyPartReader, handle: BinaryIO, cap: int, *, per_file: bool) -> tuple[int, str]:
    """Write the part to the open staged file chunk by chunk; 413 the moment it passes `cap` (the folder goes on exit)."""
    digest = hashlib.sha256()
    size = 0
    while chunk := await part.read_chunk(_CHUNK):
        size += len(chunk)
        if size > cap:
            limit = "per file" if per_file else "for one message's files together"
            raise web.HTTPRequestEntityTooLarge(
                cap, size,
                text=f"{part.filename!r} is too large: this agent takes at most {cap:,} bytes {limit}; "
                "nothing was kept",
            )
        digest.update(chunk)
        await in_thread(handle.write, chunk)
    await in_thread(handle.flush)
    return size, digest.hexdigest()


async def _unread(dest: BinaryIO, max_bytes: int) -> int:
    raise AssertionError("a part is only checked here, never fetched")


def _copied(staged: BinaryIO) -> Callable[[BinaryIO, int], Awaitable[int]]:
    """Return a `fetch` that copies the open staged file into the intake's open file (no path is opened)."""

    async def fetch(dest: BinaryIO, max_bytes: int) -> int:
        return await in_thread(copy_file, staged, dest, max_bytes=max_bytes, too_large=_too_large)

    return fetch


def _too_large(size: int, max_bytes: int) -> Exception:
    return AttachmentTooLarge("gateway", f"{size} bytes is over the {max_bytes}-byte limit")
