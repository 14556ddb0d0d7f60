"""What the core does around an adapter's file calls, for the adapter tests: the open file in, removed on failure."""

from __future__ import annotations

from pathlib import Path

from channels import Attachment, FileAdapter


async def download_to(adapter: FileAdapter, attachment: Attachment, dest: Path, *, max_bytes: int) -> int:
    """Download into a new file at `dest` as the intake does (it makes the file, and removes it when the fetch fails)."""
    with dest.open("xb") as out:
        try:
            return await adapter.download(attachment, out, max_bytes=max_bytes)
        except BaseException:
            dest.unlink()
            raise
