"""PDF text extraction (pypdf), run in a worker thread; a PDF it cannot read yields None."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

from loguru import logger

__all__ = ["MAX_PDF_TEXT_CHARS", "extract_pdf_text"]

# The extract is for reading with file_read (1 MiB max), so it is cut well below that.
MAX_PDF_TEXT_CHARS: Final = 500_000
_MAX_PAGES: Final = 500


def _extract(path: Path) -> str:
    import pypdf

    reader = pypdf.PdfReader(path)
    parts: list[str] = []
    size = 0
    for index, page in enumerate(reader.pages):
        if index >= _MAX_PAGES or size >= MAX_PDF_TEXT_CHARS:
            parts.append(f"\n[extract stopped after page {index}]")
            break
        text = page.extract_text() or ""
        parts.append(f"--- page {index + 1} ---\n{text}\n")
        size += len(text)
    return "".join(parts)[:MAX_PDF_TEXT_CHARS]


async def extract_pdf_text(path: Path) -> str | None:
    """Return the text of the PDF at `path` page by page, or None when it cannot be read."""
    try:
        return await asyncio.to_thread(_extract, path)
    except Exception as exc:  # pypdf raises many kinds for a damaged file; none may stop the turn
        logger.info("could not extract text from {}: {}", path.name, exc)
        return None
