"""`WorkspaceDir`: every operation beneath the workspace's descriptor, no link followed, on both resolvers.

Each test runs twice: with `openat2` (this kernel has it) and with the component walk a
kernel without it gets; `outside/` is what a planted link aims at and must never change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.workspace_io import (
    RESOLVERS,
    Resolver,
    UnsafeEntry,
    WorkspaceDir,
    WorkspaceFull,
    WorkspaceUsage,
    active_resolver,
    using_resolver,
)


@pytest.fixture(params=RESOLVERS)
def resolver(request: pytest.FixtureRequest) -> Iterator[Resolver]:
    with using_resolver(request.param):
        assert active_resolver() == request.param
        yield request.param


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    where = tmp_path / "outside"
    where.mkdir()
    (where / "secret").write_bytes(b"the bot token")
    return where


@pytest.fixture
def ws(tmp_path: Path, resolver: Resolver) -> Iterator[WorkspaceDir]:
    root = tmp_path / "ws"
    root.mkdir()
    with WorkspaceDir.open(root) as opened:
        yield opened


def untouched(outside: Path) -> bool:
    return sorted(p.name for p in outside.iterdir()) == ["secret"] and (outside / "secret").read_bytes() == b"the bot token"


@pytest.mark.parametrize("relative", ["../outside/secret", "a/../../outside/secret", "/etc/passwd", "a\x00b"])
def test_paths_that_leave_the_workspace_are_refused_before_any_call(ws: WorkspaceDir, relative: str) -> None:
    for attempt in (ws.open_read, ws.create, ws.open_write, ws.make_dirs, ws.delete, ws.remove_tree, ws.entries):
        with pytest.raises(UnsafeEntry, match="outside the workspace"):
            attempt(relative)


def test_no_link_is_followed_on_any_component(ws: WorkspaceDir, outside: Path) -> None:
    root = ws.root
    (root / "inside").mkdir()
    (root / "inside" / "note").write_bytes(b"inside")
    (root / "to-secret").symlink_to(outside / "secret")
    (root / "to-outside").symlink_to(outside, target_is_directory=True)
    (root / "to-inside").symlink_to(root / "inside", target_is_directory=True)  # retargetable at any time
    (root / "dangling").symlink_to(outside / "created")
    for relative in ("to-secret", "to-outside/secret", "to-inside/note"):
        with pytest.raises(UnsafeEntry, match="symbolic link"):
            ws.open_read(relative)
    for relative in ("to-secret", "dangling", "to-outside/new", "to-inside/new"):
        with pytest.raises((UnsafeEntry, FileExistsError)):
            ws.create(relative)
        with pytest.raises(UnsafeEntry, match="symbolic link"):
            ws.open_write(relative)
    for relative in ("to-outside/x", "to-inside/x/y", "to-outside"):
        with pytest.raises(UnsafeEntry, match="symbolic link"):
            ws.make_dirs(relative)
    with pytest.raises(UnsafeEntry, match="symbolic link"):
        ws.entries("to-outside")
    assert untouched(outside) and sorted(p.name for p in (root / "inside").iterdir()) == ["note"]
    with ws.open_read("inside/note") as handle:
        assert handle.read() == b"inside"


def test_what_was_opened_is_checked_on_the_descriptor(ws: WorkspaceDir, outside: Path) -> None:
    root = ws.root
    (root / "planted").hardlink_to(outside / "secret")
    (root / "folder").mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(UnsafeEntry, match="2 hard links"):
        ws.open_read("planted")
    with pytest.raises(UnsafeEntry, match="2 hard links"):
        ws.open_write("planted")
    with pytest.raises(UnsafeEntry, match="is a directory"):
        ws.open_read("folder")
    with pytest.raises(UnsafeEntry, match="not a regular file"):
        ws.open_read("pipe")  # O_NONBLOCK: a FIFO does not hang the open
    assert untouched(outside)


def test_files_are_created_exclusively_and_replaced_only_when_single(ws: WorkspaceDir) -> None:
    ws.make_dirs("a/b/c")
    with ws.create("a/b/c/new", readable=True) as handle:
        handle.write(b"first")
        handle.flush()
        assert os.pread(handle.fileno(), 5, 0) == b"first"  # read back from the descriptor, not the path
    with pytest.raises(FileExistsError):
        ws.create("a/b/c/new")
    with ws.open_write("a/b/c/new") as handle:
        handle.write(b"2nd")
    assert (ws.root / "a/b/c/new").read_bytes() == b"2nd"
    ws.make_dirs("a/b/c")  # existing folders are fine


def test_rename_unlink_and_remove_tree_act_on_the_entry_not_its_target(ws: WorkspaceDir, outside: Path) -> None:
    root = ws.root
    (root / "dir").mkdir()
    (root / "dir" / "link").symlink_to(outside / "secret")
    (root / "dir" / "door").symlink_to(outside, target_is_directory=True)
    (root / "place").symlink_to(outside / "secret")
    with ws.create("part") as handle:
        handle.write(b"whole")
    ws.move("part", "place")  # a link at the target is replaced, never written through
    assert (root / "place").read_bytes() == b"whole" and not (root / "place").is_symlink()
    ws.delete("dir/link")
    assert not (root / "dir" / "link").exists()
    ws.remove_tree("dir")
    assert not (root / "dir").exists()
    (root / "tree-link").symlink_to(outside, target_is_directory=True)
    ws.remove_tree("tree-link")  # a link is removed as an entry, its folder is not emptied
    assert not (root / "tree-link").is_symlink()
    assert untouched(outside)


def test_entries_report_links_as_links(ws: WorkspaceDir, outside: Path) -> None:
    (ws.root / "f").write_bytes(b"12")
    (ws.root / "d").mkdir()
    (ws.root / "l").symlink_to(outside, target_is_directory=True)
    kinds = {e.name: (e.kind, e.size if e.kind == "file" else None) for e in ws.entries()}
    assert kinds == {"f": ("file", 2), "d": ("dir", None), "l": ("link", None)}


def test_the_walk_is_chosen_by_the_environment_for_a_child_process(tmp_path: Path) -> None:
    code = "from orchestrator.workspace_io import active_resolver; print(active_resolver())"
    env = {**os.environ, "ORCHESTRATOR_WORKSPACE_RESOLVER": "walk"}
    walk = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert walk.stdout.strip() == "walk"


def test_usage_is_measured_once_then_counted_and_refuses_past_the_limit(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big").write_bytes(b"x" * 64 * 1024)
    (root / "link").symlink_to("/usr", target_is_directory=True)  # never walked into
    usage = WorkspaceUsage(root=root)
    room = usage.room(1_000_000)
    assert room is not None and 1_000_000 - 200_000 < room <= 1_000_000 - 64 * 1024
    assert usage.room(None) is None
    usage.add(900_000)
    with pytest.raises(WorkspaceFull, match="the workspace is full"):
        usage.require(1_000_000, 100_000)
    usage.require(None, 10**12)  # no limit: anything goes
