"""`/compact`: the sender's session folds its older messages into the stored summary now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from channels import Inbound
from orchestrator.daemon import Disposition, process_message
from orchestrator.store import SessionStore
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, Reply, status, text


def is_summary_request(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith("You keep the running summary")


def compact_toml(fake: FakeOpenAI, *, strategy: str = "window") -> str:
    return provider_toml(fake.base_url) + (
        '[agents.a]\nprovider = "fake"\nmodel = "m"\n'
        f'[agents.a.context]\nstrategy = "{strategy}"\nkeep_recent = 2\nsummary_model = "small"\n'
        '[channels.term]\nkind = "terminal"\nuser = "alice"\n'
        '[[routes]]\nchannel = "term"\nagent = "a"\nsenders = ["alice", "bob"]\n'
    )


async def send(runtime: Any, sender: str, line: str, n: int, *, chat: str = "terminal") -> Disposition:
    inbound = Inbound(is_direct=True, channel="term", chat=chat, sender=sender, text=line, event_id=f"e{n}")
    return await process_message(runtime, inbound)


async def test_compact_folds_the_session_into_a_summary_the_next_turn_is_sent(
    write_config: WriteConfig,
) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return text("SUMMARY: alice likes tea; the build is red")
        return text("fine")

    async with FakeOpenAI(default=respond) as fake:
        path: Path = write_config(compact_toml(fake))
        async with running(path) as (runtime, terms):
            screen = terms["term"].screen
            for n, line in enumerate(("I like tea", "the build is red", "any news?")):
                assert await send(runtime, "alice", line, n) is Disposition.ANSWERED
            await send(runtime, "alice", "/compact", 10)
            await screen.wait_for(lambda lines: any("Compacted" in x for x in lines))
            assert await send(runtime, "alice", "and now?", 11) is Disposition.ANSWERED
            await send(runtime, "bob", "/compact", 12, chat="other")  # another session: nothing to fold
            await screen.wait_for(lambda lines: any("Nothing was compacted" in x for x in lines))
            state = runtime.config.state_path()
    [summarized] = [r for r in fake.requests if is_summary_request(r)]
    assert summarized["model"] == "small"
    assert "I like tea" in json.dumps(summarized["messages"]) and "any news?" not in json.dumps(summarized["messages"])
    last = fake.requests[-1]["messages"]
    assert "SUMMARY: alice likes tea" in last[0]["content"] and "Summary of the earlier conversation" in last[0]["content"]
    assert [m["content"] for m in last[1:]] == ["any news?", "fine", "and now?"]  # keep_recent = 2, then the new one
    assert "Compacted: 4 earlier messages are now a summary the agent keeps." in screen.lines
    assert not any("SUMMARY" in line for line in screen.lines)  # never shown in the chat
    with SessionStore(state / "sessions.sqlite3") as store:
        [key] = [key for key, _, count in store.sessions() if count == 8]  # alice's chat: four turns
        session_id = store.find_session(key, "a")
        assert session_id is not None
        summary = store.load_summary(session_id)
    assert summary is not None and summary[1] == 4 and summary[0].startswith("SUMMARY")


async def test_compact_with_a_failing_summarizer_changes_nothing(write_config: WriteConfig) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        return status(503, message="down") if is_summary_request(body) else text("fine")

    async with FakeOpenAI(default=respond) as fake:
        path: Path = write_config(compact_toml(fake, strategy="summarize"))
        async with running(path) as (runtime, terms):
            for n, line in enumerate(("one", "two", "three")):
                await send(runtime, "alice", line, n)
            await send(runtime, "alice", "/compact", 10)
            await terms["term"].screen.wait_for(lambda lines: any("Nothing was compacted" in x for x in lines))
            await send(runtime, "alice", "four", 11)
    last = fake.requests[-1]["messages"]
    assert [m["content"] for m in last] == ["one", "fine", "two", "fine", "three", "fine", "four"]
