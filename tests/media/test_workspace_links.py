"""Links against the daemon's own workspace I/O outside a turn: the leftover sweep, and file_write racing a swapped folder.

Both resolvers (`openat2` and the component walk) are exercised; `outside/` is what the
planted links aim at and must never change.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.media.uploads import sweep_leftovers
from orchestrator.policy import SecurityPolicy
from orchestrator.tools import BUILTIN_TOOLS
from orchestrator.workspace_io import RESOLVERS, Resolver, using_resolver

OLD = time.time() - 2 * 3600


@pytest.fixture(params=RESOLVERS)
def resolver(request: pytest.FixtureRequest) -> Iterator[Resolver]:
    with using_resolver(request.param):
        yield request.param


def planted_outside(outside: Path) -> dict[str, bytes]:
    """Fill `outside` with what a sweep following links would remove; return it as it is."""
    (outside / ".incoming-0001").mkdir(parents=True)
    (outside / ".incoming-0001" / "0").write_bytes(b"someone's upload")
    (outside / "2026-01-01").mkdir()
    (outside / "2026-01-01" / ".partial-0001-a.jpg").write_bytes(b"someone's photo")
    (outside / "deep").mkdir()
    (outside / "deep" / "file").write_bytes(b"deep")
    for path in outside.rglob("*"):
        os.utime(path, (OLD, OLD))
    return {str(p.relative_to(outside)): p.read_bytes() for p in outside.rglob("*") if p.is_file()}


def as_it_is(outside: Path) -> dict[str, bytes]:
    return {str(p.relative_to(outside)): p.read_bytes() for p in outside.rglob("*") if p.is_file()}


def test_the_sweep_follows_no_link(tmp_path: Path, resolver: Resolver) -> None:
    outside = tmp_path / "outside"
    before = planted_outside(outside)
    # `uploads` itself a link to a folder outside: nothing there is a leftover of ours
    linked = tmp_path / "linked-ws"
    linked.mkdir()
    (linked / "uploads").symlink_to(outside, target_is_directory=True)
    assert sweep_leftovers(linked) == 0
    # links inside a real uploads folder: a linked day folder, a linked staging folder, a
    # link named like a partial file, and a real stale staging folder holding a link out
    root = tmp_path / "ws"
    uploads = root / "uploads"
    (uploads / "2026-01-02").mkdir(parents=True)
    (uploads / "2026-01-01").symlink_to(outside / "2026-01-01", target_is_directory=True)
    (uploads / ".incoming-link").symlink_to(outside / ".incoming-0001", target_is_directory=True)
    (uploads / "2026-01-02" / ".partial-link-b.jpg").symlink_to(outside / "2026-01-01" / ".partial-0001-a.jpg")
    (uploads / ".incoming-real").mkdir()
    (uploads / ".incoming-real" / "door").symlink_to(outside / "deep", target_is_directory=True)
    (uploads / "2026-01-02" / ".partial-real-c.jpg").write_bytes(b"half")
    for path in uploads.rglob("*"):
        os.utime(path, (OLD, OLD), follow_symlinks=False)
    assert sweep_leftovers(root) == 2  # the real staging folder and the real partial file
    assert not (uploads / ".incoming-real").exists() and not (uploads / "2026-01-02" / ".partial-real-c.jpg").exists()
    assert (uploads / ".incoming-link").is_symlink() and (uploads / "2026-01-02" / ".partial-link-b.jpg").is_symlink()
    assert as_it_is(outside) == before


FLIP = """
import ctypes, os, sys
root, outside = sys.argv[1], sys.argv[2]
door, link = os.path.join(root, "door").encode(), os.path.join(root, "door.link").encode()
os.symlink(outside, link)
renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
print("flipping", flush=True)
while True:  # `door` is a real folder, then a link to outside, then the folder again: each swap atomic
    if renameat2(-100, door, -100, link, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
"""


async def test_file_write_never_lands_outside_through_a_folder_swapped_for_a_link(tmp_path: Path, resolver: Resolver) -> None:
    # The gap the last-component-only O_NOFOLLOW left: the path is checked, then a folder on
    # the way becomes a link before the open. A command flips one as fast as it can.
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    (workspace / "door").mkdir(parents=True)
    security = SecurityPolicy(
        agent="a", autonomy="full", workspace=workspace, shell_allowed_commands=frozenset(),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1024,
    )
    write = BUILTIN_TOOLS["file_write"].bind(security)
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, str(workspace), str(outside)], stdout=subprocess.PIPE)
    try:
        assert flipper.stdout is not None and flipper.stdout.readline() == b"flipping\n"
        written = refused = 0
        for n in range(5000):
            try:
                await write.invoke({"path": f"door/new-{n}.txt", "content": "planted"})
                written += 1
            except ToolFailure:
                refused += 1
            if n % 1000 == 0:
                await asyncio.sleep(0)
        assert flipper.poll() is None  # it flipped all along
    finally:
        flipper.kill()
        flipper.wait()
        if flipper.stdout is not None:
            flipper.stdout.close()
    assert sorted(outside.iterdir()) == []  # not one file landed outside
    assert written + refused == 5000  # (how often each happens depends on the scheduler: not asserted)
