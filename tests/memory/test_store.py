"""MemoryStore and the memory tools: isolation per agent, concurrency, restart, ranking."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from orchestrator.errors import ToolFailure
from orchestrator.memory import MemoryStore, memory_tools


def ids(listing: str) -> list[int]:
    return [int(i) for i in re.findall(r"^- #(\d+) ", listing, re.MULTILINE)]


def writers(listing: str) -> set[str]:
    return set(re.findall(r"^- #\d+ \(by (\w+)\)", listing, re.MULTILINE))


async def test_concurrent_writes_by_two_agents_never_cross_read(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        alice = memory_tools(store, agent="alice", read_from=())
        bob = memory_tools(store, agent="bob", read_from=())
        bob_reads_alice = memory_tools(store, agent="bob", read_from=("alice",))
        writes = [
            tools["memory_store"].invoke({"text": f"shared secret number {i} of {who}", "tags": [who]})
            for i in range(60)
            for who, tools in (("alice", alice), ("bob", bob))
        ]
        stored = await asyncio.gather(*writes)
        assert len({s for s in stored}) == 120  # every write got its own id
        query = {"query": "secret", "limit": 50}
        seen_by_alice = await alice["memory_recall"].invoke(query)
        seen_by_bob = await bob["memory_recall"].invoke(query)
        seen_with_read_from = await bob_reads_alice["memory_recall"].invoke(query)
    assert writers(seen_by_alice) == {"alice"} and len(ids(seen_by_alice)) == 50
    assert writers(seen_by_bob) == {"bob"}
    assert writers(seen_with_read_from) == {"alice", "bob"}
    assert "of bob" not in seen_by_alice and "of alice" not in seen_by_bob


async def test_two_connections_to_one_file_write_concurrently(tmp_path: Path) -> None:
    # The daemon and an `orchestrator agent` run share the file: WAL plus a busy timeout.
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as daemon, MemoryStore(path) as cli:
        records = await asyncio.gather(
            *(s.store(agent=a, text=f"note {i}") for i in range(50) for s, a in ((daemon, "x"), (cli, "y")))
        )
        assert len({r.id for r in records}) == 100
        found = await daemon.recall("note", agents=("x", "y"), limit=200)
    assert sorted(r.id for r in found) == sorted(r.id for r in records)


async def test_forget_deletes_only_the_agents_own_memories(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        bob = memory_tools(store, agent="bob", read_from=())
        alice = memory_tools(store, agent="alice", read_from=("bob",))
        bobs = await store.store(agent="bob", text="the vault code is 1234")
        alices = await store.store(agent="alice", text="the vault is in the basement")
        with pytest.raises(ToolFailure) as refused:
            await alice["memory_forget"].invoke({"id": bobs.id})
        with pytest.raises(ToolFailure) as unknown:
            await alice["memory_forget"].invoke({"id": 99999})
        # the same answer for "not yours" and "does not exist": nothing to probe
        assert refused.value.reason == f"you have no memory #{bobs.id} (only your own memories can be forgotten)"
        assert unknown.value.reason.startswith("you have no memory #99999")
        assert ids(await bob["memory_recall"].invoke({"query": "vault"})) == [bobs.id]
        assert await alice["memory_forget"].invoke({"id": alices.id}) == f"Forgot memory #{alices.id}."
        assert ids(await alice["memory_recall"].invoke({"query": "vault"})) == [bobs.id]


async def test_memories_survive_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "state" / "memory.sqlite3"
    with MemoryStore(path) as store:
        stored = await memory_tools(store, agent="ops", read_from=())["memory_store"].invoke(
            {"text": "The backup runs at 03:00 UTC.", "tags": ["backup", "schedule"]}
        )
    assert stored == "Stored memory #1."
    with MemoryStore(path) as reopened:
        recalled = await memory_tools(reopened, agent="ops", read_from=())["memory_recall"].invoke(
            {"query": "when does the backup run"}
        )
        stranger = await memory_tools(reopened, agent="intern", read_from=())["memory_recall"].invoke(
            {"query": "backup"}
        )
    assert recalled == (
        '1 memories match "when does the backup run" (best first):\n'
        "- #1 (by ops) [backup, schedule]: The backup runs at 03:00 UTC."
    )
    assert stranger == 'No memories match "backup".'


async def test_recall_ranks_by_bm25_with_stemming_and_tags(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        noise = [await store.store(agent="a", text=f"lunch order {i} was pizza") for i in range(5)]
        one_word = await store.store(agent="a", text="the deploy pipeline is slow")
        all_words = await store.store(agent="a", text="deploy keys rotate every month")
        tagged = await store.store(agent="a", text="ask Dana first", tags=("rotation",))
        found = await store.recall("deploy key rotation", agents=("a",), limit=10)
        by_tag = await store.recall("rotation", agents=("a",), limit=10)
        syntax = await store.recall('deploy" AND NOT (x* OR :', agents=("a",), limit=10)
        nothing = await store.recall("?!", agents=("a",), limit=10)
    ranked = [r.id for r in found]
    # every query word (stemmed: keys~key, rotate~rotation) beats one word; noise never matches
    assert ranked[0] == all_words.id
    assert set(ranked) == {all_words.id, one_word.id, tagged.id}
    assert not {n.id for n in noise} & set(ranked)
    assert [r.id for r in by_tag][0] in (tagged.id, all_words.id) and tagged.id in {r.id for r in by_tag}
    # FTS5 syntax in a query is reduced to its words, never interpreted or raised
    assert {r.id for r in syntax} >= {one_word.id, all_words.id}
    assert nothing == []


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        ("memory_store", {"text": "  "}, "argument 'text' must not be blank"),
        ("memory_store", {"text": "x" * 8001}, "argument 'text' is 8001 characters; the limit is 8000"),
        ("memory_store", {"text": "x", "tags": "a,b"}, "argument 'tags' must be an array of strings, not a string"),
        ("memory_store", {"text": "x", "tags": [3]}, "tags[0] must be a string, not an integer"),
        ("memory_store", {"text": "x", "tags": ["a"] * 17}, "argument 'tags' must hold at most 16 items"),
        ("memory_store", {"text": "x", "tags": ["a" * 65]}, "tags[0] is 65 characters; the limit is 64"),
        ("memory_recall", {"query": ""}, "argument 'query' must not be empty"),
        ("memory_recall", {"query": "x", "limit": 0}, "argument 'limit' must be an integer from 1 to 50, not 0"),
        ("memory_recall", {"query": "x", "limit": True}, "argument 'limit' must be an integer, not a boolean"),
        ("memory_forget", {"id": "1"}, "argument 'id' must be an integer, not a string"),
    ],
)
async def test_bad_arguments_are_tool_errors(tmp_path: Path, tool: str, arguments: dict[str, object], reason: str) -> None:
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        with pytest.raises(ToolFailure) as failure:
            await memory_tools(store, agent="a", read_from=())[tool].invoke(arguments)
        assert await store.recall("x", agents=("a",), limit=5) == []
    assert (failure.value.tool, failure.value.reason) == (tool, reason)
