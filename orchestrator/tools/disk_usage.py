"""How much disk a workspace takes: what `[agents.X] workspace_max_mb` is measured against."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["disk_usage"]


def disk_usage(root: Path) -> int:
    """Return the bytes of disk the files under `root` take (blocks, each inode once).

    Links are not followed (a symlink out of the workspace counts as itself), and
    allocated blocks are counted, not sizes: a sparse file takes what it really holds,
    a hard-linked file is counted once. Entries that vanish meanwhile count nothing.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    pending = [str(root)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key not in seen:
                    seen.add(key)
                    total += info.st_blocks * 512
    return total
