"""`take_in`: the one place an inbound message's attachments are checked, fetched and prepared.

Every path that carries media (channel turns, the gateway, ACP) calls it with the resolved
`MediaPolicy`: every attachment is checked against the policy before any byte is fetched,
each is streamed into the agent's workspace (`uploads/<date>/<name>`) under its cap, then
prepared for the model: images stay files the engine shows to a vision model, documents
are announced as paths (a PDF's text beside it), voice and audio are transcribed. Any
failure refuses the whole message with one line for the user and removes what this call
wrote, so nothing is stored half-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from loguru import logger

from channels import IMAGE_MIMES, AttachmentTooLarge, acceptable_mime, looks_like
from orchestrator.errors import OrchestratorError, ProviderError
from orchestrator.media.pdf import PdfTooCostly, extract_pdf_text
from orchestrator.media.uploads import EXTRACT_SUFFIX, safe_name, sweep_leftovers, upload_target
from orchestrator.threads import in_thread
from orchestrator.workspace_io import UnsafeEntry, WorkspaceDir, WorkspaceFull, reopen_read_only, workspace_usage

if TYPE_CHECKING:
    from orchestrator.media.policy import MediaPolicy
    from orchestrator.policy import SecurityPolicy

__all__ = ["DOWNLOAD_TIMEOUT_S", "Incoming", "Intake", "MediaRefused", "bytes_fetch", "check", "fetch_failed", "take_in"]

DOWNLOAD_TIMEOUT_S: Final = 60.0
_TRANSCRIBE_TIMEOUT_S: Final = 120.0
_HEAD_BYTES: Final = 16
_AUDIBLE: Final = frozenset({"voice", "audio", "video"})
_NO_FILES: Final = "I can't take files here."

Fetch = Callable[[BinaryIO, int], Awaitable[int]]
_UNWRITABLE: Final = "I could not store that file (the workspace is not writable)."
_FULL: Final = "I could not store that file: the agent's workspace is full."


class MediaRefused(OrchestratorError):
    """An attachment was refused; `reason` is the one line the user is told."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """One attachment to take in; `fetch(dest, max_bytes)` streams it into the open file `dest`, returning its size.

    `fetch` raises `AttachmentTooLarge` past `max_bytes` and an `OrchestratorError` (e.g.
    `ChannelError`) when it fails; `size` is what the sender declared (None: unknown).
    """

    kind: str
    mime: str
    fetch: Fetch
    size: int | None = None
    name: str | None = None
    digest: str | None = None  # the content's hash when it is known up front (inline uploads)


@dataclass(frozen=True, slots=True, kw_only=True)
class Intake:
    """A message's attachments, ready: the text the model gets, the transcript's references, the quotes to echo."""

    text: str
    media: tuple[dict[str, Any], ...]
    transcripts: tuple[str, ...] = ()


def fetch_failed(kind: str) -> MediaRefused:
    """Return the refusal for an attachment of `kind` that could not be fetched (or looked up)."""
    return MediaRefused(f"I could not fetch the {_label(kind, singular=True)}; please send it again.")


def bytes_fetch(data: bytes) -> Fetch:
    """Return a `fetch` that writes `data` (an inline upload: gateway, ACP), honouring the cap."""

    async def fetch(dest: BinaryIO, max_bytes: int) -> int:
        if len(data) > max_bytes:
            raise AttachmentTooLarge("inline", f"{len(data)} bytes is over the {max_bytes}-byte limit")
        await in_thread(dest.write, data)
        return len(data)

    return fetch


def check(policy: MediaPolicy, items: Sequence[Incoming]) -> None:
    """Refuse the message if any attachment breaks the policy; nothing is fetched here."""
    if not items:
        return
    if not policy.accept:
        raise MediaRefused(_NO_FILES)
    declared = 0
    for item in items:
        if not policy.accepts(item.kind):
            raise MediaRefused(f"I can't take {_label(item.kind)} here.")
        if item.kind == "image" and not policy.vision:
            raise MediaRefused("This agent cannot look at pictures; please describe it in words instead.")
        if item.kind in _AUDIBLE and (policy.transcriber is None or policy.transcription_model is None):
            raise MediaRefused(
                f"I can't listen to {_label(item.kind)} here: no transcription model is configured."
            )
        if not acceptable_mime(item.kind, item.mime):
            raise MediaRefused(f"I can't read files of type {item.mime or 'unknown'}.")
        if item.size is not None and item.size > policy.max_bytes:
            raise MediaRefused(_too_large(item, policy.max_bytes))
        declared += item.size or 0
    if declared > policy.max_message_bytes:
        raise MediaRefused(
            f"These files are {_mb(declared)} together; one message may carry at most {_mb(policy.max_message_bytes)}."
        )


async def take_in(
    policy: MediaPolicy,
    security: SecurityPolicy,
    items: Sequence[Incoming],
    *,
    text: str,
    today: date | None = None,
    timeout_s: float = DOWNLOAD_TIMEOUT_S,
) -> Intake:
    """Check, fetch and prepare `items`; return what the turn runs with.

    Raises `MediaRefused` (nothing kept) for an attachment the policy refuses, one over its
    cap (enforced while reading), a fetch that fails or takes longer than `timeout_s`
    (default `DOWNLOAD_TIMEOUT_S`), a damaged image, a transcription that fails, or a write
    that would take the workspace past `workspace_max_bytes`. Every file is made beneath the
    workspace's descriptor (`WorkspaceDir`): a link planted there is never followed.
    Cancellation removes what was written and propagates.
    """
    check(policy, items)
    if not items:
        return Intake(text=text.strip(), media=())
    if swept := await in_thread(sweep_leftovers, security.workspace):
        logger.info("removed {} upload(s) a killed fetch left in {}", swept, security.workspace)
    try:
        workspace = WorkspaceDir.open(security.workspace)
    except OSError as exc:
        logger.warning("cannot store an upload in {}: {}", security.workspace, exc)
        raise MediaRefused(_UNWRITABLE) from exc
    with workspace:
        return await _take_in(policy, security, workspace, items, text=text, today=today, timeout_s=timeout_s)


async def _take_in(
    policy: MediaPolicy,
    security: SecurityPolicy,
    workspace: WorkspaceDir,
    items: Sequence[Incoming],
    *,
    text: str,
    today: date | None,
    timeout_s: float,
) -> Intake:
    written: list[str] = []
    notes: list[str] = []
    refs: list[dict[str, Any]] = []
    heard: list[str] = []
    left = policy.max_message_bytes
    try:
        for item in items:
            cap = min(policy.max_bytes, left)
            relative, handle, size = await _fetch(item, security, workspace, cap, written, today, timeout_s)
            with handle:
                left -= size
                mime = item.mime.split(";", 1)[0].strip().lower()
                ref: dict[str, Any] = {"kind": item.kind, "mime": mime, "size": size, "path": relative}
                if item.kind == "image" or (item.kind == "document" and mime in IMAGE_MIMES):
                    head = os.pread(handle.fileno(), _HEAD_BYTES, 0)
                    if not looks_like(mime, head):
                        raise MediaRefused("That picture looks damaged (it is not the image it claims to be); I could not read it.")
                if item.kind == "image":
                    notes.append(f"[image attached: {relative} ({mime}, {size:,} bytes); it is shown to you with this message]")
                elif item.kind == "document":
                    notes.append(await _document_note(policy, relative, handle, mime, size, ref, written, workspace, security))
                else:
                    audio = await in_thread(os.pread, handle.fileno(), size, 0)
                    spoken = await _transcribe(policy, audio, relative.rsplit("/", 1)[-1], mime, item.kind)
                    ref["transcribed"] = True
                    heard.append(spoken)
                    notes.append(
                        f"[{_label(item.kind, singular=True)} attached: {relative}; below is its automatic "
                        f"transcription, not typed text]\n<transcription>\n{spoken}\n</transcription>"
                    )
            refs.append(ref)
    except BaseException:
        for relative in written:
            with contextlib.suppress(OSError, UnsafeEntry):
                workspace.delete(relative, missing_ok=True)
        raise
    body = "\n\n".join([text.strip(), *notes]).strip() if text.strip() else "\n\n".join(notes)
    return Intake(text=body, media=tuple(refs), transcripts=tuple(heard))


async def _fetch(
    item: Incoming, security: SecurityPolicy, workspace: WorkspaceDir, cap: int, written: list[str],
    today: date | None, timeout_s: float,
) -> tuple[str, BinaryIO, int]:
    """Fetch `item` into a new hidden file, renamed into place when whole; return its path, the open file, its size."""
    usage = workspace_usage(security.workspace)
    room = await in_thread(usage.room, security.workspace_max_bytes)
    if room is not None and room <= 0:
        raise MediaRefused(_FULL)
    try:
        relative = upload_target(workspace, safe_name(item.name, kind=item.kind, mime=item.mime), today=today)
        # Fetched under a hidden name, renamed only when whole: a crash never leaves a
        # truncated file where the model would read it. O_EXCL: nothing there is followed.
        folder, _, name = relative.rpartition("/")
        partial = f"{folder}/.partial-{secrets.token_hex(4)}-{name}"
        handle = workspace.create(partial, readable=True)
    except (UnsafeEntry, OSError) as exc:
        logger.warning("cannot store an upload in {}: {}", security.workspace, exc)
        raise MediaRefused(_UNWRITABLE) from exc
    written.append(partial)
    limit = cap if room is None else min(cap, room)
    try:
        try:
            async with asyncio.timeout(timeout_s):
                size = await item.fetch(handle, limit)
            handle.flush()
        except AttachmentTooLarge as exc:
            raise MediaRefused(_FULL if limit < cap else _too_large(item, cap)) from exc
        except TimeoutError as exc:
            raise MediaRefused(f"Fetching the {_label(item.kind, singular=True)} took too long; please send it again.") from exc
        except OrchestratorError as exc:
            logger.info("attachment download failed: {}", exc)
            raise fetch_failed(item.kind) from exc
        except OSError as exc:
            logger.warning("cannot store an upload in {}: {}", security.workspace, exc)
            raise MediaRefused(_UNWRITABLE) from exc
        if size > limit:  # a fetch that ignored its cap is still refused
            raise MediaRefused(_FULL if limit < cap else _too_large(item, cap))
        try:
            workspace.move(partial, relative)
        except (UnsafeEntry, OSError) as exc:  # the folder was swapped for a link meanwhile, or is gone
            logger.warning("cannot store an upload in {}: {}", security.workspace, exc)
            raise MediaRefused(_UNWRITABLE) from exc
    except BaseException:
        handle.close()
        raise
    written[-1] = relative
    usage.add(size)
    return relative, handle, size


async def _document_note(
    policy: MediaPolicy, relative: str, handle: BinaryIO, mime: str, size: int, ref: dict[str, Any],
    written: list[str], workspace: WorkspaceDir, security: SecurityPolicy,
) -> str:
    note = f"[document attached: {relative} ({mime}, {size:,} bytes); read it with your file tools]"
    if mime != "application/pdf":
        return note
    # The child gets a read-only descriptor of this very file (reopened through the open
    # file, never through its workspace path), not the one the upload was written with.
    readable = reopen_read_only(handle.fileno())
    try:
        extracted = await extract_pdf_text(readable, policy.pdf)
    except PdfTooCostly as exc:  # a parse past its limits is an attack or a mistake: refused, nothing kept
        raise MediaRefused(exc.reason) from exc
    finally:
        os.close(readable)
    if extracted is None:
        return f"[document attached: {relative} ({mime}, {size:,} bytes); its text could not be extracted]"
    text_path = relative + EXTRACT_SUFFIX
    data = extracted.encode("utf-8")
    usage = workspace_usage(security.workspace)
    try:
        await in_thread(usage.require, security.workspace_max_bytes, len(data))
    except WorkspaceFull as exc:
        raise MediaRefused(_FULL) from exc
    try:
        # O_EXCL beneath the workspace: a link planted at the extract's name is never written through
        out = workspace.create(text_path)
    except (UnsafeEntry, OSError) as exc:
        logger.warning("cannot store the text of {} in {}: {}", relative, security.workspace, exc)
        return f"[document attached: {relative} ({mime}, {size:,} bytes); its text could not be stored]"
    written.append(text_path)
    with out:
        await in_thread(out.write, data)
    usage.add(len(data))
    ref["text_path"] = text_path
    return (
        f"[document attached: {relative} ({mime}, {size:,} bytes); its extracted text "
        f"({len(extracted):,} characters) is in {text_path}: read it with file_read]"
    )


async def _transcribe(policy: MediaPolicy, audio: bytes, name: str, mime: str, kind: str) -> str:
    transcriber, model = policy.transcriber, policy.transcription_model
    if transcriber is None or model is None:  # `check` refused this already
        raise MediaRefused(f"I can't listen to {_label(kind)} here: no transcription model is configured.")
    try:
        async with asyncio.timeout(_TRANSCRIBE_TIMEOUT_S):
            text = await transcriber.transcribe(model=model, audio=audio, name=name, mime=mime)
    except (ProviderError, TimeoutError) as exc:
        logger.warning("transcription failed: {}", exc)
        raise MediaRefused(f"I could not transcribe the {_label(kind, singular=True)}; please try again or type it.") from exc
    text = text.strip()
    if not text:
        raise MediaRefused(f"I could not hear any words in the {_label(kind, singular=True)}.")
    return text


def _label(kind: str, *, singular: bool = False) -> str:
    names = {
        "image": ("picture", "pictures"), "document": ("file", "files"), "voice": ("voice message", "voice messages"),
        "audio": ("audio file", "audio files"), "video": ("video", "videos"),
    }
    one, many = names.get(kind, ("file", "files"))
    return one if singular else many


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 1_000_000 else f"{size:,} bytes"


def _too_large(item: Incoming, cap: int) -> str:
    return f"That {_label(item.kind, singular=True)} is too large: the limit is {_mb(cap)}."
