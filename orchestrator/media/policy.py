"""MediaPolicy: what attachments one resolved execution takes, and how (the seam builds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from orchestrator.policy import SandboxKind

__all__ = ["NO_MEDIA", "MediaPolicy", "ParserLimits", "Transcriber"]


class Transcriber(Protocol):
    """An OpenAI-compatible `/audio/transcriptions` endpoint (the provider's client)."""

    async def transcribe(self, *, model: str, audio: bytes, name: str, mime: str) -> str:
        """Return the text spoken in `audio` (a file called `name`); raises `ProviderError` when the endpoint fails."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ParserLimits:
    """How an uploaded document's parser child is confined (the seam picks `sandbox`).

    `sandbox` is the strongest kind this host has (bwrap, else Landlock, else none: the
    limits alone); `timeout_s` is wall-clock, `cpu_seconds` RLIMIT_CPU, `memory_bytes` RLIMIT_AS.
    """

    sandbox: SandboxKind
    timeout_s: float
    cpu_seconds: int
    memory_bytes: int

    def describe(self) -> list[str]:
        """Return the limits as the `pdf_*` strings of the `media` row."""
        return [
            f"pdf_sandbox:{self.sandbox}",
            f"pdf_timeout_s:{self.timeout_s:g}",
            f"pdf_cpu_s:{self.cpu_seconds}",
            f"pdf_memory_mb:{self.memory_bytes // 2**20}",
        ]

    def describe_limit(self, what: str) -> str:
        """Return one limit for a message: `30 s`, `20 s of CPU` or `256 MiB`."""
        if what == "memory":
            return f"{self.memory_bytes // 2**20} MiB"
        return f"{self.cpu_seconds} s of CPU" if what == "cpu" else f"{self.timeout_s:g} s"


# NO_MEDIA's: it accepts nothing, so nothing is ever parsed under it (every other policy is the seam's).
_NOTHING_PARSED: Final = ParserLimits(sandbox="none", timeout_s=1.0, cpu_seconds=1, memory_bytes=128 * 2**20)


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaPolicy:
    """One execution's media policy; only the seam builds it (`accept` is empty where no media can arrive).

    `send_file` is whether the `send_file` tool is offered (the agent names it and the path
    has a chat to post to); `transcriber` is None when no transcription model is configured;
    `pdf` confines the child that reads a PDF's text.
    """

    accept: frozenset[str]
    max_bytes: int
    max_message_bytes: int
    image_detail: str
    vision: bool
    echo_transcript: bool
    transcription_model: str | None = None
    transcription_provider: str | None = None
    transcriber: Transcriber | None = None
    pdf: ParserLimits  # no default: omission is never a grant, the seam always decides it
    send_file: bool = False

    def accepts(self, kind: str) -> bool:
        """Return whether an attachment of `kind` may be taken in."""
        return kind in self.accept

    @property
    def takes_images(self) -> bool:
        """Return whether an image would reach the model (accepted and the model can see)."""
        return "image" in self.accept and self.vision

    def describe(self) -> list[str]:
        """Return the policy as sorted-comparable strings (the `media` row of the matrix)."""
        transcription = (
            f"transcription:{self.transcription_provider}/{self.transcription_model}"
            if self.transcription_model else "transcription:none"
        )
        return [
            *(f"accept:{kind}" for kind in sorted(self.accept)),
            f"max_bytes:{self.max_bytes}",
            f"max_message_bytes:{self.max_message_bytes}",
            f"image_detail:{self.image_detail}",
            f"vision:{'yes' if self.vision else 'no'}",
            f"echo_transcript:{'yes' if self.echo_transcript else 'no'}",
            transcription,
            *(["send_file"] if self.send_file else []),
            *self.pdf.describe(),
        ]


NO_MEDIA = MediaPolicy(
    accept=frozenset(), max_bytes=1, max_message_bytes=1, image_detail="auto", vision=False, echo_transcript=False,
    pdf=_NOTHING_PARSED,
)
