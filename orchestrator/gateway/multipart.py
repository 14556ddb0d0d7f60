"""`multipart/form-data` on `POST /api/agents/{a}/messages`: each file part streamed to disk under the agent's caps.

A form carries the fields `text` and `session` and up to ten file parts, each named by its
kind (`image`, `document`, `voice`, `audio`, `video`) with its `filename` and
`Content-Type`. Every file part is checked against the agent's resolved media policy from
its headers alone, before a byte of it is read (an agent without `media` is refused at the
first part), then streamed into a hidden staging folder of the agent's workspace with
`max_bytes` (per file) and `max_message_bytes` (the form's files together) enforced while
reading: past either the request is refused 413 and nothing is kept. What was staged goes
through the same intake (`take_in`) as every path, then the staging folder is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from aiohttp import BodyPartReader, hdrs, web
from aiohttp.http_exceptions import BadHttpMessage, InvalidHeader

from loguru import logger

from channels import AttachmentTooLarge
from orchestrator.errors import WorkspaceEscape
from orchestrator.media import DOWNLOAD_TIMEOUT_S, UPLOADS_DIR, Incoming, MediaPolicy, MediaRefused, check

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy

__all__ = ["FORM_CONTENT_TYPE", "Form", "staged_form"]

FORM_CONTENT_TYPE: Final = "multipart/form-data"
_KINDS: Final = frozenset({"image", "document", "voice", "audio", "video"})
_FIELDS: Final = frozenset({"text", "session"})
_MAX_ATTACHMENTS: Final = 10
_CHUNK: Final = 64 * 1024
_UNWRITABLE: Final = "I could not store that file (the workspace is not writable)."  # the intake's line
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
    try:
        folder = security.confine(f"{UPLOADS_DIR}/.incoming-{secrets.token_hex(6)}")
    except WorkspaceEscape as exc:  # `uploads` leads out of the jail: store nothing
        raise MediaRefused(_UNWRITABLE) from exc
    try:
        try:
            async with asyncio.timeout(DOWNLOAD_TIMEOUT_S):
                form = await _read(request, policy, folder, max_field_bytes)
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
        await asyncio.to_thread(shutil.rmtree, folder, True)


async def _read(request: web.Request, policy: MediaPolicy, folder: Path, max_field_bytes: int) -> Form:
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
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            logger.warning("cannot stage an upload in {}: {}", folder, exc)
            raise MediaRefused(_UNWRITABLE) from exc
        staged = folder / str(len(items))
        per_file = left >= policy.max_bytes
        size, digest = await _stream(part, staged, min(policy.max_bytes, left), per_file=per_file)
        left -= size
        items.append(Incoming(kind=name, mime=mime, size=size, name=part.filename, fetch=_moved(staged), digest=digest))
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


async def _stream(part: BodyPartReader, dest: Path, cap: int, *, per_file: bool) -> tuple[int, str]:
    """Write the part to `dest` chunk by chunk; 413 (and `dest` removed) the moment it passes `cap`."""
    digest = hashlib.sha256()
    size = 0
    handle = await asyncio.to_thread(dest.open, "wb")
    try:
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
            await asyncio.to_thread(handle.write, chunk)
    except BaseException:
        handle.close()
        dest.unlink(missing_ok=True)
        raise
    handle.close()
    return size, digest.hexdigest()


async def _unread(dest: Path, max_bytes: int) -> int:
    raise AssertionError("a part is only checked here, never fetched")


def _moved(staged: Path) -> Callable[[Path, int], Awaitable[int]]:
    """Return a `fetch` that moves the staged file into the intake's place (a rename: same filesystem)."""

    async def fetch(dest: Path, max_bytes: int) -> int:
        size = staged.stat().st_size
        if size > max_bytes:
            raise AttachmentTooLarge("gateway", f"{size} bytes is over the {max_bytes}-byte limit")
        await asyncio.to_thread(shutil.move, staged, dest)
        return size

    return fetch
