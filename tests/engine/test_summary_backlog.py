"""A summarizer outage loses nothing: the next summaries cover every message since the last one's end, in order."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.engine import StopReason, Summary, Transcript
from orchestrator.seam import ConstructionPath, Services, resolve
from orchestrator.sessions import MemoryTranscripts, Sessions, StoredTranscripts, TranscriptSource
from orchestrator.store import SessionStore
from tests.conftest import provider_toml
from tests.engine.test_context import FILLER, facts_in, is_summary_request, request_tokens
from tests.fakes.openai_server import FakeOpenAI, Reply, status, text

pytestmark = pytest.mark.slow

LIMIT = 2_000


class Summarizer:
    """Answer summary requests (while `up`) with every fact they mention; record what each was sent."""

    def __init__(self) -> None:
        self.up = True
        self.folded: list[list[str]] = []  # the facts of each answered request's new messages, in order

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not is_summary_request(body):
            return text("ok")
        if not self.up:
            return status(503, message="summarizer down")
        new = str(body["messages"][1]["content"]).split("\nNew messages:\n", 1)[1]
        self.folded.append(re.findall(r"fact-\d+", new))
        return text("facts: " + " ".join(facts_in(body)))


def backlog_toml(fake: FakeOpenAI, *, timeout_s: float = 30.0) -> str:
    return provider_toml(fake.base_url) + (
        '\n[agents.a]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "You are terse."\n'
        "[agents.a.budget]\nmax_history_messages = 6\n"  # a session holds 24 messages: an outage outgrows it
        f'[agents.a.context]\nmax_context_tokens = {LIMIT}\nstrategy = "summarize"\nkeep_recent = 2\n'
        f"summary_timeout_s = {timeout_s}\n"
    )


async def chat(config: Config, services: Services, sessions: Sessions, first: int, turns: int) -> None:
    for n in range(first, first + turns):
        turn = await sessions.run_turn(
            "chat", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=services),
            text=f"note fact-{n}: {FILLER}", approver=None, actor="tg:alice",
        )
        assert turn.completed().stop is StopReason.COMPLETED


def assert_folded_in_order_without_gaps(summarizer: Summarizer, upto: int) -> None:
    folded = [int(f.split("-")[1]) for chunk in summarizer.folded for f in chunk]
    assert folded == list(range(len(folded))), folded  # each message once, in order, none skipped
    assert len(folded) >= upto


async def outage(
    config: Config, services: Services, summarizer: Summarizer, source: Callable[[], TranscriptSource]
) -> Sessions:
    sessions = Sessions(transcripts=source())
    await chat(config, services, sessions, 0, 6)  # the summarizer works: a first summary
    assert summarizer.folded
    summarizer.up = False
    await chat(config, services, sessions, 6, 20)  # 40 messages while it is down: more than a session holds
    summarizer.up = True
    return sessions


async def test_after_an_outage_the_summaries_cover_every_message_since_the_last_one(
    load: Callable[..., Config], services: Services, tmp_path: Path, debug_log: io.StringIO
) -> None:
    summarizer = Summarizer()
    async with FakeOpenAI(default=summarizer) as fake:
        config = load(backlog_toml(fake))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            sessions = await outage(config, services, summarizer, lambda: StoredTranscripts(store))
            await chat(config, services, sessions, 26, 4)
            session_id = store.find_session("chat", "a")
            assert session_id is not None
            stored = store.load_summary(session_id)
    assert stored is not None
    text_, covers = stored
    assert covers >= 52  # caught up: all but the newest few of the 60 messages
    assert_folded_in_order_without_gaps(summarizer, covers // 2)
    assert facts_in({"messages": [{"content": text_}]}) == [f"fact-{n}" for n in range(covers // 2)]
    assert "summarizing failed" in debug_log.getvalue()
    assert max(request_tokens(r) for r in fake.requests) <= LIMIT  # summary requests fit too


async def test_a_restart_during_the_outage_still_folds_what_only_the_store_holds(
    load: Callable[..., Config], services: Services, tmp_path: Path
) -> None:
    summarizer = Summarizer()
    async with FakeOpenAI(default=summarizer) as fake:
        config = load(backlog_toml(fake))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            await outage(config, services, summarizer, lambda: StoredTranscripts(store))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:  # a new daemon: only the store remembers
            await chat(config, services, Sessions(transcripts=StoredTranscripts(store)), 26, 4)
            session_id = store.find_session("chat", "a")
            assert session_id is not None
            stored = store.load_summary(session_id)
    assert stored is not None and stored[1] >= 52
    assert_folded_in_order_without_gaps(summarizer, stored[1] // 2)


async def test_a_library_session_holds_what_is_not_folded_until_the_summarizer_is_back(
    load: Callable[..., Config], services: Services
) -> None:
    summarizer = Summarizer()
    held = MemoryTranscripts(prefix="lib:")
    async with FakeOpenAI(default=summarizer) as fake:
        config = load(backlog_toml(fake))
        sessions = await outage(config, services, summarizer, lambda: held)
        await chat(config, services, sessions, 26, 4)
    transcript = held.open("chat", "a", keep=24).transcript
    assert transcript.summary is not None and transcript.summary.covers >= 52
    assert_folded_in_order_without_gaps(summarizer, transcript.summary.covers // 2)
    assert len(transcript.messages) <= 24  # once folded, memory is back to the window and its slack


async def test_a_backlog_too_long_for_one_turn_is_folded_in_chunks_over_the_next_turns(
    load: Callable[..., Config], services: Services, tmp_path: Path, debug_log: io.StringIO
) -> None:
    summarizer = Summarizer()
    long_filler = FILLER * 4  # about 180 tokens a message: a summary call takes only a few
    async with FakeOpenAI(default=summarizer) as fake, FakeOpenAI(default=summarizer, latency_s=0.6) as slow:
        extra = f'[providers.slow]\nbase_url = "{slow.base_url}"\nmax_retries = 0\n'
        config = load(
            backlog_toml(fake, timeout_s=2.0).replace("\n[agents.a]", extra + "\n[agents.a]")
            + 'summary_provider = "slow"\nsummary_model = "tiny"\n'
        )
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            sessions = Sessions(transcripts=StoredTranscripts(store))

            async def say(first: int, turns: int) -> None:
                for n in range(first, first + turns):
                    turn = await sessions.run_turn(
                        "chat", agent="a",
                        execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=services),
                        text=f"note fact-{n}: {long_filler}", approver=None, actor="tg:alice",
                    )
                    assert turn.completed().stop is StopReason.COMPLETED

            summarizer.up = False
            await say(0, 24)  # 48 messages, none folded
            summarizer.up = True
            await say(24, 1)
            deferred = "deferred to the next turn (its time is spent)" in debug_log.getvalue()
            calls_first_turn = len(summarizer.folded)
            await say(25, 12)
            session_id = store.find_session("chat", "a")
            assert session_id is not None
            stored = store.load_summary(session_id)
    assert deferred and 0 < calls_first_turn < len(summarizer.folded)  # part now, the rest on later turns
    assert stored is not None and stored[1] >= 74 - 6  # caught up: all but the window of the 74 messages
    assert_folded_in_order_without_gaps(summarizer, stored[1] // 2)
    assert all(r["model"] == "tiny" for r in slow.requests)
    answer = LIMIT // 4
    assert max(request_tokens(r) for r in slow.requests) + answer <= LIMIT  # room left for the summary itself


def test_without_a_store_a_folding_transcript_holds_what_is_not_folded_up_to_a_cap(debug_log: io.StringIO) -> None:
    def chat(n: int) -> Transcript:
        transcript = Transcript(session="lib")
        for i in range(n):
            transcript.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"})
        return transcript

    window = chat(30)
    window.compact(10)  # a `window` agent: memory is the window
    assert (len(window.messages), window.dropped) == (10, 20)
    folding = chat(30)
    folding.folding = True
    folding.summary = Summary(text="s", covers=12)
    folding.compact(10)  # only what the summary covers leaves memory
    assert (folding.dropped, folding.messages[0]["content"]) == (12, "m12")
    assert "left memory before they were summarized" not in debug_log.getvalue()
    outage = chat(200)
    outage.folding = True
    outage.compact(10)  # nothing folded: held up to 8 x 10, the rest leaves memory, logged
    assert len(outage.messages) == 80 and outage.dropped == 120
    assert "120 messages left memory before they were summarized" in debug_log.getvalue()
