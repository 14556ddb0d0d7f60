"""Context as a resolved surface: token-bounded requests, running summaries, a failing summarizer."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.engine import StopReason, Transcript, run_tool_call_loop
from orchestrator.engine.context import calibrate, estimate_message, estimate_specs
from orchestrator.seam import ConstructionPath, Services, resolve
from orchestrator.sessions import Sessions, StoredTranscripts
from orchestrator.store import SessionStore
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, Reply, status, text

pytestmark = pytest.mark.slow

LIMIT = 2_000
FILLER = "the quick brown fox jumps over the lazy dog " * 3


def is_summary_request(body: dict[str, Any]) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and str(first["content"]).startswith("You keep the running summary")


def facts_in(body: dict[str, Any]) -> list[str]:
    found = re.findall(r"fact-\d+", "\n".join(str(m.get("content")) for m in body["messages"]))
    return sorted(set(found), key=lambda f: int(f.split("-")[1]))


def summarizing_fake(summary: Callable[[dict[str, Any]], Reply] | None = None) -> Callable[[dict[str, Any]], Reply]:
    """Answer summary requests with every fact they mention (so the beginning survives each fold), others 'ok'."""

    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return summary(body) if summary is not None else text("facts: " + " ".join(facts_in(body)))
        return text(f"ok {len(body['messages'])}")

    return respond


def context_toml(fake: FakeOpenAI, context: str, *, extra: str = "") -> str:
    return provider_toml(fake.base_url) + extra + (
        '\n[agents.a]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "You are terse."\ntools = ["list_dir"]\n'
        f"[agents.a.context]\nmax_context_tokens = {LIMIT}\n{context}"
    )


def request_tokens(body: dict[str, Any]) -> int:
    return sum(estimate_message(m) for m in body["messages"]) + estimate_specs(body.get("tools", []))


def main_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.requests if not is_summary_request(r)]


async def run_session(config: Config, services: Services, store: SessionStore, turns: int) -> list[str]:
    sessions = Sessions(transcripts=StoredTranscripts(store))
    replies = []
    for n in range(turns):
        turn = await sessions.run_turn(
            "chat", agent="a", execution=lambda: resolve(config, "a", path=ConstructionPath.CHANNEL, services=services),
            text=f"note fact-{n}: {FILLER}", approver=None, actor="tg:alice",
        )
        result = turn.completed()
        assert result.stop is StopReason.COMPLETED
        replies.append(result.text)
    return replies


async def test_a_500_message_session_stays_within_the_budget_and_still_sees_its_beginning(
    load: Callable[..., Config], services: Services, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake:
        config = load(context_toml(fake, 'strategy = "summarize"\nkeep_recent = 4\n'))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            replies = await run_session(config, services, store, 250)  # 500 messages
            session_id = store.find_session("chat", "a")
            assert session_id is not None
            stored = store.load_summary(session_id)
            assert store.load_messages(session_id)[1] == 500  # every message is still persisted
    sent = main_requests(fake)
    assert len(sent) == 250
    assert max(request_tokens(r) for r in sent) <= LIMIT
    assert max(len(json.dumps(r["messages"])) for r in sent) < LIMIT * 4  # and well under in plain size
    last = sent[-1]["messages"]
    assert last[0]["role"] == "system" and "Summary of the earlier conversation" in last[0]["content"]
    assert "fact-0" in last[0]["content"]  # the beginning reaches the model through the summaries
    assert "fact-249" in last[-1]["content"]
    assert "fact-0" not in json.dumps(last[1:])  # ... and not as a message
    summaries = len(fake.requests) - len(sent)
    assert 0 < summaries < 250 // 5  # folds come in batches, not once per turn
    assert stored is not None and "fact-0" in stored[0]
    assert all(not r.startswith("facts:") for r in replies)  # the summary is never a reply


async def test_the_window_strategy_drops_the_oldest_by_tokens_without_a_model_call(
    load: Callable[..., Config], services: Services, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake:
        config = load(context_toml(fake, ""))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            await run_session(config, services, store, 60)
    assert not any(is_summary_request(r) for r in fake.requests)
    sent = fake.requests
    assert max(request_tokens(r) for r in sent) <= LIMIT
    last = sent[-1]["messages"]
    assert "fact-59" in last[-1]["content"] and "fact-0" not in json.dumps(last)
    assert last[1]["role"] == "user"  # the window never starts mid-exchange


async def test_a_failing_summarizer_keeps_the_window_and_logs_it(
    load: Callable[..., Config], services: Services, tmp_path: Path, debug_log: io.StringIO
) -> None:
    async with FakeOpenAI(default=summarizing_fake(lambda body: status(500, message="summarizer down"))) as fake:
        config = load(context_toml(fake, 'strategy = "summarize"\nkeep_recent = 2\n'))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            replies = await run_session(config, services, store, 40)
            session_id = store.find_session("chat", "a")
            assert session_id is not None and store.load_summary(session_id) is None
            assert store.load_messages(session_id)[1] == 80  # nothing lost
    sent = main_requests(fake)
    assert len(replies) == len(sent) == 40
    assert max(request_tokens(r) for r in sent) <= LIMIT
    assert "fact-39" in sent[-1]["messages"][-1]["content"]
    assert "Summary of the earlier" not in json.dumps(sent[-1]["messages"])
    assert "summarizing failed" in debug_log.getvalue()
    summaries = len(fake.requests) - len(sent)
    assert 0 < summaries <= 40  # at most one attempt per turn


async def test_a_summarizer_past_its_time_does_not_hold_up_the_turn(
    load: Callable[..., Config], services: Services, tmp_path: Path, debug_log: io.StringIO
) -> None:
    async with FakeOpenAI(default=summarizing_fake()) as fake, FakeOpenAI(latency_s=30) as slow:
        extra = f'[providers.slow]\nbase_url = "{slow.base_url}"\nmax_retries = 0\n'
        context = 'strategy = "summarize"\nkeep_recent = 2\nsummary_provider = "slow"\nsummary_model = "tiny"\n'
        context += "summary_timeout_s = 0.2\n"
        config = load(context_toml(fake, context, extra=extra))
        with SessionStore(tmp_path / "sessions.sqlite3") as store:
            replies = await run_session(config, services, store, 30)  # past the 40-message cap
    assert len(replies) == 30 and len(main_requests(fake)) == 30
    assert slow.requests and slow.requests[0]["model"] == "tiny"  # the summary model was asked ...
    assert "summarizing took over 0.2s" in debug_log.getvalue()  # ... and given up on


async def test_l1_a_huge_tool_result_and_message_never_push_a_request_over_the_budget(
    load: Callable[..., Config], services: Services, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=text("done")) as fake:
        config = load(context_toml(fake, "keep_recent = 0\n").replace('tools = ["list_dir"]', 'tools = ["list_dir"]\nautonomy = "full"'))
        execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services)
        transcript = Transcript(session="s")
        for n in range(10):
            transcript.append({"role": "user", "content": f"q{n} " + "x" * 3000})
            transcript.append({"role": "assistant", "content": f"a{n}"})
        result = await run_tool_call_loop(execution, transcript, "y" * 30_000)  # ~10k tokens alone
    assert result.stop is StopReason.COMPLETED
    [body] = fake.requests
    assert request_tokens(body) <= LIMIT
    newest = body["messages"][-1]["content"]
    assert newest.startswith("yyy") and "[cut to fit the context" in newest


async def test_a_system_prompt_over_the_budget_stops_the_turn_before_any_call(
    load: Callable[..., Config], services: Services
) -> None:
    async with FakeOpenAI(default=None) as fake:
        config = load(context_toml(fake, "").replace("You are terse.", "rule " * 4000))
        execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services)
        result = await run_tool_call_loop(execution, Transcript(session="s"), "hi")
    assert result.stop is StopReason.CONTEXT_OVERFLOW
    assert "over max_context_tokens = 2000" in result.text
    assert fake.requests == []


async def test_a_provider_counting_more_tokens_than_estimated_shrinks_the_next_requests(
    load: Callable[..., Config], services: Services
) -> None:
    transcript = Transcript(session="s")
    calibrate(transcript, reported=300, raw=400)  # fewer than estimated: the estimate stands
    assert transcript.token_scale == 1.0
    calibrate(transcript, reported=1000, raw=500)
    assert transcript.token_scale == 2.0
    calibrate(transcript, reported=10_000, raw=100)
    assert transcript.token_scale == 4.0  # capped
    async with FakeOpenAI(default=text("ok")) as fake:
        config = load(context_toml(fake, ""))
        execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services)
        scaled = Transcript(session="s2")
        for n in range(20):
            scaled.append({"role": "user", "content": f"q{n} " + "x" * 600})
            scaled.append({"role": "assistant", "content": "fine"})
        scaled.token_scale = 2.0
        await run_tool_call_loop(execution, scaled, "next")
    [body] = fake.requests
    assert request_tokens(body) * 2 <= LIMIT  # the estimate, doubled, still fits
    assert request_tokens(body) * 2 > LIMIT - 300  # and the window is not emptied for it
