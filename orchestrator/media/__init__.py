"""Inbound attachments: the media policy value, the intake, and the content parts the model sees."""

from channels import IMAGE_MIMES, acceptable_mime

from orchestrator.media.content import MEDIA_KEY, ImageCache, model_messages
from orchestrator.media.intake import (
    DOWNLOAD_TIMEOUT_S,
    Incoming,
    Intake,
    MediaRefused,
    bytes_fetch,
    check,
    fetch_failed,
    take_in,
)
from orchestrator.media.policy import NO_MEDIA, MediaPolicy, Transcriber
from orchestrator.media.uploads import UPLOADS_DIR, safe_name, upload_target

__all__ = [
    "DOWNLOAD_TIMEOUT_S",
    "IMAGE_MIMES",
    "MEDIA_KEY",
    "NO_MEDIA",
    "UPLOADS_DIR",
    "ImageCache",
    "Incoming",
    "Intake",
    "MediaPolicy",
    "MediaRefused",
    "Transcriber",
    "acceptable_mime",
    "bytes_fetch",
    "check",
    "fetch_failed",
    "model_messages",
    "safe_name",
    "take_in",
    "upload_target",
]
