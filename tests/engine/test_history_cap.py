"""History entries are capped: a huge answer is sent to the user once, never in every later request."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.engine.transcript import MAX_ENTRY_CHARS
from orchestrator.seam import ConstructionPath, Services, resolve
from orchestrator.store import SessionStore
from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI, text

HUGE = "word " * 200_000  # a 1 MB model answer


def request_chars(request: dict[str, object]) -> int:
    return len(json.dumps(request["messages"]))


async def test_a_huge_answer_reaches_the_user_whole_but_later_requests_carry_it_cut(
    fake_llm: FakeOpenAI, load: Callable[..., Config], services: Services, tmp_path: Path
) -> None:
    # the provider allows an answer this long (the fake stops at max_tokens as a real server does)
    toml = provider_toml(fake_llm.base_url).replace("max_retries = 0", "max_retries = 0\nmax_output_tokens = 300000")
    config = load(toml + '\n[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    fake_llm.script(text(HUGE), text("short"), text("again"))
    transcript = Transcript(session="s")
    first = await run_tool_call_loop(execution, transcript, "say a lot")
    assert first.text == HUGE  # the turn's own answer is whole (the reply path cuts it for the platform)
    await run_tool_call_loop(execution, transcript, "and now?")
    later = fake_llm.requests[1]
    kept = [m["content"] for m in later["messages"] if m["role"] == "assistant"]
    assert len(kept) == 1 and len(kept[0]) < MAX_ENTRY_CHARS + 100
    assert kept[0].endswith(f"[cut from history: 1,000,000 characters, the first {MAX_ENTRY_CHARS:,} kept]")
    assert request_chars(later) < MAX_ENTRY_CHARS + 1_000

    # What is persisted is the cut entry, and a transcript stored before the cap is cut on load.
    with SessionStore(tmp_path / "sessions.sqlite3") as store:
        session = store.open_session("k", "a")
        store.append_messages(session, 0, transcript.messages)
        store.append_messages(session, len(transcript.messages), [{"role": "user", "content": HUGE}])
        stored, total = store.load_messages(session)
    assert total == 5
    assert max(len(json.dumps(m)) for m in stored[:4]) < MAX_ENTRY_CHARS + 200
    reloaded = Transcript(session="s", messages=stored)
    await run_tool_call_loop(execution, reloaded, "once more")
    assert request_chars(fake_llm.requests[2]) < 2 * MAX_ENTRY_CHARS + 1_000
