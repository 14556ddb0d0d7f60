"""What the provider tests share: an `on_text` sink and the fast retry delay."""

from __future__ import annotations

from typing import Final

__all__ = ["FAST", "Pieces"]

# The SDKs ignore a Retry-After of 0 and back off 0.5 s or more; 1 ms keeps retries fast.
FAST: Final = 0.001


class Pieces:
    """An `on_text` sink that keeps every piece it is given."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, text: str) -> None:
        self.pieces.append(text)
