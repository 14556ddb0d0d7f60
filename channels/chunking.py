"""Split a reply into platform-sized chunks without breaking code fences."""

from __future__ import annotations

__all__ = ["chunk_text"]

_FENCE = "```"


def chunk_text(text: str, limit: int) -> list[str]:
    """Return `text` split into chunks of at most `limit` characters.

    Splits prefer paragraph, then line, then word boundaries. A chunk that ends inside a
    fenced code block closes the fence, and the next chunk reopens it with the same info
    string, so every chunk renders as valid Markdown on its own.
    """
    if limit < 16:
        raise ValueError("limit must leave room for fences")
    if len(text) <= limit:
        return [text] if text else []
    chunks: list[str] = []
    reopen = ""  # the fence line to prepend when the previous chunk ended inside a block
    rest = text
    while rest:
        budget = limit - len(reopen)
        if len(rest) <= budget:
            chunks.append(reopen + rest)
            break
        # leave room for a closing fence in case this chunk ends inside a code block
        cut = _cut_point(rest, budget - len(_FENCE) - 1)
        piece, rest = rest[:cut], rest[cut:].lstrip("\n") if rest[cut:cut + 1] == "\n" else rest[cut:]
        body = reopen + piece
        open_fence = _open_fence(body)
        if open_fence is not None:
            body = body.rstrip("\n") + "\n" + _FENCE
            reopen = open_fence + "\n"
        else:
            reopen = ""
        chunks.append(body)
    return chunks


def _cut_point(text: str, budget: int) -> int:
    window = text[:budget]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > budget // 2:
            return at + (len(sep) if sep == " " else 0)
    return budget


def _open_fence(text: str) -> str | None:
    """Return the opening fence line if `text` ends inside a fenced block, else None."""
    fence: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            fence = None if fence is not None else stripped
    return fence
