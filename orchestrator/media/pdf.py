"""PDF text extraction: pypdf in a confined child process, never in the daemon's own.

A PDF pypdf cannot read yields None (the document is still announced); one whose parse
runs past the agent's limits raises `PdfTooCostly`, whose `reason` is the user's line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from loguru import logger

from orchestrator.errors import OrchestratorError
from orchestrator.media.confined import ParserFailed, ParserOverLimit, run_pdf_child
from orchestrator.media.policy import ParserLimits

__all__ = ["MAX_PDF_TEXT_CHARS", "PdfTooCostly", "extract_pdf_text"]

# The extract is for reading with file_read (1 MiB max), so it is cut well below that.
MAX_PDF_TEXT_CHARS: Final = 500_000
_MAX_PAGES: Final = 500


class PdfTooCostly(OrchestratorError):
    """Reading a PDF's text ran past a limit; `reason` is the one line the user is told."""

    def __init__(self, *, what: str, limits: ParserLimits) -> None:
        self.what = what
        if what == "memory":
            self.reason = f"I could not read that PDF within {limits.describe_limit('memory')} of memory; nothing was kept."
        else:
            self.reason = f"I could not read that PDF within {limits.describe_limit(what)}; nothing was kept."
        super().__init__(self.reason)


async def extract_pdf_text(source: Path | int, limits: ParserLimits) -> str | None:
    """Return the text of the PDF `source` (a path, or a descriptor open for reading) page by page.

    None when it cannot be read. A path is opened without following a link; a descriptor
    stays the caller's. Raises `PdfTooCostly` when the parse passes `limits` (the child is
    killed); cancellation kills the child and propagates.
    """
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC) if isinstance(source, Path) else source
    try:
        data = await run_pdf_child(fd, limits, max_pages=_MAX_PAGES, max_chars=MAX_PDF_TEXT_CHARS)
    except ParserOverLimit as exc:
        logger.warning("reading a PDF's text stopped: {}", exc)
        raise PdfTooCostly(what=exc.what, limits=limits) from exc
    except ParserFailed as exc:
        logger.warning("{}", exc)
        return None
    finally:
        if isinstance(source, Path):
            os.close(fd)
    if data is None:
        logger.info("could not extract text from a PDF (pypdf could not read it)")
        return None
    return data.decode("utf-8", "replace")[:MAX_PDF_TEXT_CHARS]
