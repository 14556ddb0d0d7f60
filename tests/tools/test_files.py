"""file_read, file_write and list_dir stay inside the workspace and fail clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.policy import SecurityPolicy
from orchestrator.tools import BUILTIN_TOOLS, Tool


def _policy(workspace: Path) -> SecurityPolicy:
    return SecurityPolicy(
        agent="ops",
        autonomy="full",
        workspace=workspace,
        shell_allowed_commands=frozenset(),
        http_allowed_hosts=(),
        http_allow_private_addresses=False,
        http_max_bytes=1024,
    )


def _tool(name: str, tmp_path: Path) -> Tool:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return BUILTIN_TOOLS[name].bind(_policy(workspace))


async def _failure(tool: Tool, arguments: dict[str, Any]) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        await tool.invoke(arguments)
    assert caught.value.tool == tool.spec.name
    return caught.value


def test_specs_declare_strict_schemas() -> None:
    for name in ("file_read", "file_write", "list_dir"):
        params = BUILTIN_TOOLS[name].spec.parameters
        assert params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
    assert BUILTIN_TOOLS["file_read"].spec.read_only
    assert BUILTIN_TOOLS["list_dir"].spec.read_only
    assert not BUILTIN_TOOLS["file_write"].spec.read_only


async def test_write_then_read_round_trips_and_creates_parents(tmp_path: Path) -> None:
    write, read = _tool("file_write", tmp_path), _tool("file_read", tmp_path)

    result = await write.invoke({"path": "notes/2024/today.md", "content": "héllo\n"})

    assert "notes/2024/today.md" in result
    assert (tmp_path / "workspace/notes/2024/today.md").read_text("utf-8") == "héllo\n"
    assert await read.invoke({"path": "notes/2024/today.md"}) == "héllo\n"


async def test_write_replaces_existing_content(tmp_path: Path) -> None:
    write = _tool("file_write", tmp_path)
    await write.invoke({"path": "a.txt", "content": "a much longer first version"})
    await write.invoke({"path": "a.txt", "content": "short"})
    assert (tmp_path / "workspace/a.txt").read_text() == "short"


async def test_large_file_round_trips(tmp_path: Path) -> None:
    content = "line of text\n" * 20_000
    await _tool("file_write", tmp_path).invoke({"path": "big.txt", "content": content})
    assert await _tool("file_read", tmp_path).invoke({"path": "big.txt"}) == content


async def test_list_dir_sorts_and_marks_directories(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "b.txt").write_text("b")
    (workspace / "a_dir").mkdir()
    (workspace / "a_dir" / "inner.txt").write_text("x")
    (workspace / "C.md").write_text("c")
    list_dir = _tool("list_dir", tmp_path)

    assert await list_dir.invoke({}) == "C.md\na_dir/\nb.txt"
    assert await list_dir.invoke({"path": "."}) == "C.md\na_dir/\nb.txt"
    assert await list_dir.invoke({"path": "a_dir"}) == "inner.txt"


async def test_list_dir_of_empty_directory_says_so(tmp_path: Path) -> None:
    assert await _tool("list_dir", tmp_path).invoke({}) == "(empty directory)"


@pytest.mark.parametrize("name", ["file_read", "file_write", "list_dir"])
@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd"])
async def test_escaping_paths_are_refused(tmp_path: Path, name: str, path: str) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    arguments: dict[str, Any] = {"path": path}
    if name == "file_write":
        arguments["content"] = "overwritten"

    failure = await _failure(_tool(name, tmp_path), arguments)

    assert "outside the workspace" in failure.reason
    assert (tmp_path / "outside.txt").read_text() == "secret"


async def test_symlink_to_outside_file_is_refused_for_read_and_write(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    read = _tool("file_read", tmp_path)
    (tmp_path / "workspace" / "link.txt").symlink_to(outside)

    read_failure = await _failure(read, {"path": "link.txt"})
    write_failure = await _failure(
        _tool("file_write", tmp_path), {"path": "link.txt", "content": "pwned"}
    )

    assert "symbolic link" in read_failure.reason
    assert "symbolic link" in write_failure.reason
    assert "secret" not in read_failure.reason
    assert outside.read_text() == "secret"


async def test_symlinked_directory_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    list_dir = _tool("list_dir", tmp_path)
    (tmp_path / "workspace" / "door").symlink_to(outside, target_is_directory=True)

    await _failure(_tool("file_write", tmp_path), {"path": "door/new.txt", "content": "x"})
    await _failure(list_dir, {"path": "door"})

    assert list(outside.iterdir()) == []


async def test_dangling_symlink_pointing_outside_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "created-outside.txt"
    write = _tool("file_write", tmp_path)
    (tmp_path / "workspace" / "trap.txt").symlink_to(target)

    failure = await _failure(write, {"path": "trap.txt", "content": "x"})

    assert "symbolic link" in failure.reason
    assert not target.exists()


async def test_no_symlink_is_followed_even_one_pointing_inside(tmp_path: Path) -> None:
    # A link inside can be retargeted between any check and the use: the daemon follows none.
    read = _tool("file_read", tmp_path)
    workspace = tmp_path / "workspace"
    (workspace / "real.txt").write_text("real")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")

    assert await read.invoke({"path": "real.txt"}) == "real"
    assert "symbolic link" in (await _failure(read, {"path": "alias.txt"})).reason


async def test_read_failures_are_clear(tmp_path: Path) -> None:
    read = _tool("file_read", tmp_path)
    workspace = tmp_path / "workspace"
    (workspace / "dir").mkdir()
    (workspace / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")

    assert "no such file" in (await _failure(read, {"path": "missing.txt"})).reason
    assert "is a directory" in (await _failure(read, {"path": "dir"})).reason
    assert "not UTF-8" in (await _failure(read, {"path": "blob.bin"})).reason


async def test_write_and_list_failures_are_clear(tmp_path: Path) -> None:
    write, list_dir = _tool("file_write", tmp_path), _tool("list_dir", tmp_path)
    workspace = tmp_path / "workspace"
    (workspace / "dir").mkdir()
    (workspace / "file.txt").write_text("x")

    assert "is a directory" in (await _failure(write, {"path": "dir", "content": "x"})).reason
    assert "cannot" in (await _failure(write, {"path": "file.txt/child", "content": "x"})).reason
    assert "no such directory" in (await _failure(list_dir, {"path": "nope"})).reason
    assert "not a directory" in (await _failure(list_dir, {"path": "file.txt"})).reason


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("file_read", {}, "missing required argument 'path'"),
        ("file_read", {"path": 3}, "must be a string"),
        ("file_read", {"path": "a", "offset": 1}, "unexpected argument(s): offset"),
        ("file_write", {"path": "a"}, "missing required argument 'content'"),
        ("file_write", {"path": "a", "content": ["x"]}, "must be a string"),
        ("list_dir", {"path": None, "recursive": True}, "unexpected argument(s): recursive"),
        ("list_dir", {"path": 1.5}, "must be a string"),
    ],
)
async def test_bad_arguments_are_tool_failures(
    tmp_path: Path, name: str, arguments: dict[str, Any], expected: str
) -> None:
    failure = await _failure(_tool(name, tmp_path), arguments)
    assert expected in failure.reason


async def test_hardlink_planted_by_ln_does_not_reach_a_file_outside(tmp_path: Path) -> None:
    # The attack: `shell` runs `ln /outside/secret planted` (or the workspace was shared),
    # then the model reads and overwrites the outside file through the link.
    outside = tmp_path / "secret.txt"
    outside.write_text("the bot token")
    reader, writer = _tool("file_read", tmp_path), _tool("file_write", tmp_path)
    (tmp_path / "workspace" / "planted").hardlink_to(outside)

    read = await _failure(reader, {"path": "planted"})
    write = await _failure(writer, {"path": "planted", "content": "pwned"})

    assert "2 hard links" in read.reason and "2 hard links" in write.reason
    assert outside.read_text() == "the bot token"


async def test_a_file_with_a_single_link_is_still_read_and_replaced(tmp_path: Path) -> None:
    writer, reader = _tool("file_write", tmp_path), _tool("file_read", tmp_path)
    (tmp_path / "workspace" / "note.txt").write_text("a much longer first version")

    await writer.invoke({"path": "note.txt", "content": "short"})

    assert await reader.invoke({"path": "note.txt"}) == "short"
