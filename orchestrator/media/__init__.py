"""Inbound attachments: the media policy value, the intake, and the content parts the model sees."""

from channels import IMAGE_MIMES, acceptable_mime

from orchestrator.media.budget import IMAGE_BUDGET_BYTES, ImageBudget, image_budget, use_image_budget
from orchestrator.media.content import MEDIA_KEY, encoded_size, model_messages
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
from orchestrator.media.policy import NO_MEDIA, MediaPolicy, ParserLimits, Transcriber
from orchestrator.media.uploads import UPLOADS_DIR, safe_name, upload_target

__all__ = [
    "DOWNLOAD_TIMEOUT_S",
    "IMAGE_BUDGET_BYTES",
    "IMAGE_MIMES",
    "MEDIA_KEY",
    "NO_MEDIA",
    "UPLOADS_DIR",
    "ImageBudget",
    "Incoming",
    "Intake",
    "MediaPolicy",
    "MediaRefused",
    "ParserLimits",
    "Transcriber",
    "acceptable_mime",
    "bytes_fetch",
    "check",
    "encoded_size",
    "fetch_failed",
    "image_budget",
    "model_messages",
    "safe_name",
    "take_in",
    "upload_target",
    "use_image_budget",
]
