"""ACP prompt media: image, audio and blob resource blocks through the media intake.

What `initialize` advertises follows the agent's resolved media policy: `image` when it
takes images and its model can see, `audio` when it takes voice or audio and has a
transcription model. A block of a kind not advertised is refused as invalid params (the
client should not have sent it); an advertised one goes through `take_in` like a chat
attachment, so the caps, types and the workspace jail are the same on every path.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from orchestrator.media import Incoming, Intake, MediaPolicy, MediaRefused, bytes_fetch, take_in

if TYPE_CHECKING:
    from orchestrator.seam import ResolvedAgentExecution

__all__ = ["advertises_audio", "not_advertised", "take_in_prompt"]


def advertises_audio(media: MediaPolicy) -> bool:
    """Return whether `promptCapabilities.audio` is true: audio is taken and can be transcribed."""
    takes = media.accepts("voice") or media.accepts("audio")
    return takes and media.transcriber is not None and media.transcription_model is not None


def not_advertised(blocks: list[Any], media: MediaPolicy) -> list[str]:
    """Return the block kinds of `blocks` that `initialize` did not advertise, sorted."""
    refused = set()
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "image" and not media.takes_images:
            refused.add("image")
        elif kind == "audio" and not advertises_audio(media):
            refused.add("audio")
    return sorted(refused)


async def take_in_prompt(blocks: list[Any], execution: ResolvedAgentExecution, *, text: str) -> Intake:
    """Take in the prompt's image, audio and blob resource blocks; raises `MediaRefused`."""
    items: list[Incoming] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "image":
            items.append(_incoming("image", block.mime_type, block.data, getattr(block, "uri", None)))
        elif kind == "audio":
            items.append(_incoming("audio", block.mime_type, block.data, None))
        elif kind == "resource" and hasattr(block.resource, "blob"):
            resource = block.resource
            mime = resource.mime_type or "application/octet-stream"
            items.append(_incoming("document", mime, resource.blob, resource.uri))
    if not items:
        return Intake(text=text, media=())
    return await take_in(execution.media, execution.security, items, text=text)


def _incoming(kind: str, mime: str, data: str, uri: str | None) -> Incoming:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise MediaRefused(f"The attached {kind} is not valid base64 data.") from None
    name = uri.rstrip("/").rsplit("/", 1)[-1] if uri else None
    return Incoming(kind=kind, mime=mime, size=len(raw), name=name, fetch=bytes_fetch(raw))
