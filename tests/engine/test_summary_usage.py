"""Summary calls are recorded as usage for the turn's agent, path, sender and session, and count toward the day only."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from orchestrator.config import Config
from orchestrator.providers import Usage
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, UsageMeter, budget_key, resolve
from orchestrator.sessions import Sessions, StoredTranscripts
from orchestrator.store import SessionStore, UsageLog
from tests.conftest import provider_toml
from tests.engine.test_context import FILLER, is_summary_request, summarizing_fake
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture(name="log")
def _log(tmp_path: Path) -> UsageLog:
    return UsageLog(tmp_path / "usage.sqlite3")


@pytest.fixture(name="metered")
async def _metered(log: UsageLog) -> AsyncIterator[Services]:
    opened = Services(usage=UsageMeter(log=log))
    yield opened
    await opened.providers.aclose()
    log.close()


def summary_toml(fake: FakeOpenAI, *, per_day: int = 20_000_000) -> str:
    return provider_toml(fake.base_url) + (
        '\n[agents.a]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "You are terse."\n'
        f"[agents.a.budget]\nmax_history_messages = 6\nmax_tokens_per_day = {per_day}\n"
        '[agents.a.context]\nmax_context_tokens = 2000\nstrategy = "summarize"\nkeep_recent = 2\nsummary_model = "tiny"\n'
    )


async def test_summary_calls_are_rows_of_their_own_counted_for_the_day_not_the_turn(
    load: Callable[..., Config], metered: Services, log: UsageLog, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake:
        config = load(summary_toml(fake))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            sessions = Sessions(transcripts=StoredTranscripts(store))
            turn_tokens = 0
            for n in range(12):
                turn = await sessions.run_turn(
                    "chat", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered),
                    text=f"note fact-{n}: {FILLER}", approver=None, actor="tg:alice",
                )
                turn_tokens += turn.completed().tokens
            session_id = store.find_session("chat", "a")
    summaries = [r for r in fake.requests if is_summary_request(r)]
    assert summaries and all(r["model"] == "tiny" for r in summaries)
    by_model = {t.key: t for t in log.totals(by="model")}
    assert set(by_model) == {"fake/m", "fake/tiny (summary)"}
    assert by_model["fake/tiny (summary)"].calls == len(summaries)
    assert by_model["fake/m"].calls == 12
    turn_rows = by_model["fake/m"]
    assert turn_tokens == turn_rows.input_tokens + turn_rows.output_tokens  # a turn's budget never pays for a fold
    [mine] = log.totals(by="sender", agent="a")
    assert mine.key == "tg:alice" and mine.calls == 12 + len(summaries)  # the sender whose turn folded
    everything = sum(t.input_tokens + t.output_tokens for t in by_model.values())
    assert metered.usage.spent_today(budget_key("a", "tg:alice")) == everything  # ... and the day pays for it
    rows = log._db.execute("SELECT DISTINCT path, session, purpose FROM usage ORDER BY purpose").fetchall()
    assert rows == [("channel", str(session_id), "summary"), ("channel", str(session_id), "turn")]


async def test_compact_records_for_the_sender_and_defers_when_the_day_is_spent(
    load: Callable[..., Config], metered: Services, log: UsageLog, tmp_path: Path, debug_log: io.StringIO
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake:
        config = load(summary_toml(fake, per_day=100_000))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            sessions = Sessions(transcripts=StoredTranscripts(store))
            for n in range(3):  # too few to fold on their own
                await sessions.run_turn(
                    "chat", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered),
                    text=f"note fact-{n}: {FILLER}", approver=None, actor="tg:bob",
                )
            assert not any(is_summary_request(r) for r in fake.requests)
            spent = metered.usage.spent_today(budget_key("a", "tg:bob"))
            # someone else's day is spent: bob's /compact still runs and is recorded for bob
            metered.usage.record(
                binding=resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered).model,
                provider="fake", model="m", usage=Usage(input_tokens=99_990, output_tokens=0), estimated=False,
                agent="a", path="channel", sender="tg:carol", session="x",
            )
            folded = await sessions.compact(
                "chat", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered),
                actor="tg:bob",
            )
            assert folded and folded > 0
            assert metered.usage.spent_today(budget_key("a", "tg:bob")) > spent
            # erin's own day is spent: her /compact is deferred, no call is made
            for n in range(3):
                await sessions.run_turn(
                    "chat2", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered),
                    text=f"note fact-{n}: {FILLER}", approver=None, actor="tg:erin",
                )
            metered.usage.record(
                binding=resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered).model,
                provider="fake", model="m", usage=Usage(input_tokens=100_000, output_tokens=0), estimated=False,
                agent="a", path="channel", sender="tg:erin", session="x",
            )
            before = len(fake.requests)
            debug_log.truncate(0)
            assert await sessions.compact(
                "chat2", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered),
                actor="tg:erin",
            ) == 0
            assert len(fake.requests) == before
            assert "the daily token budget has too little left for it" in debug_log.getvalue()
    [summary] = [t for t in log.totals(by="model") if t.key.endswith("(summary)")]
    assert summary.calls >= 1
    assert {t.key for t in log.totals(by="sender")} == {"tg:bob", "tg:carol", "tg:erin"}


async def test_a_summary_call_asks_for_its_share_of_the_window_and_no_more_than_the_day_leaves(
    load: Callable[..., Config], metered: Services, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake:
        config = load(summary_toml(fake, per_day=100_000))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            sessions = Sessions(transcripts=StoredTranscripts(store))

            def execution() -> ResolvedAgentExecution:
                return resolve(config, "a", path=ConstructionPath.CHANNEL, services=metered)

            for chat, actor in (("roomy", "tg:dan"), ("tight", "tg:fay")):
                for n in range(3):
                    await sessions.run_turn(
                        chat, agent="a", execution=execution, text=f"note fact-{n}: {FILLER}", approver=None, actor=actor,
                    )
            # fay's day leaves 600 tokens: what her fold sends and less than its share to write
            spent = metered.usage.spent_today(budget_key("a", "tg:fay"))
            metered.usage.record(
                binding=execution().model, provider="fake", model="m",
                usage=Usage(input_tokens=100_000 - spent - 600, output_tokens=0), estimated=False,
                agent="a", path="channel", sender="tg:fay", session="x",
            )
            for chat, actor in (("roomy", "tg:dan"), ("tight", "tg:fay")):
                assert await sessions.compact(chat, agent="a", execution=execution, actor=actor)
    roomy, tight = [r["max_tokens"] for r in fake.requests if is_summary_request(r)]
    assert roomy == 2000 // 4  # its share of max_context_tokens: the day is far from spent
    assert 64 <= tight < 600 - 64 and tight < roomy  # the day's 600, less what the fold sends
    assert metered.usage.spent_today(budget_key("a", "tg:fay")) <= 100_000
