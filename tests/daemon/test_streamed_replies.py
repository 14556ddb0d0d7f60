"""Streamed replies on Telegram: the daemon, the real PTB adapter, the fake Bot API and a model
that writes its answer over about two seconds.

Private chats stream through drafts and end in one sendMessage; groups send one message and
edit it. Every test checks what the chat ends up showing and that the fake never had to
answer 429 (the pacing kept within the flood limit).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, reload_config, replay_unfinished, start_channels
from orchestrator.daemon.delivery import RESENT
from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, cut_off, paced, text, tool_call
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

TOKEN = "444444:DDD-stream-bot"
USER, OTHER, GROUP = 5, 6, -1005
ANSWER = " ".join(f"word{i}" for i in range(40)) + "."
INTERVAL_S = 0.3


def bot_toml(
    fake_llm: FakeOpenAI, tg: FakeTelegram, *, stream: bool = True, autonomy: str = "full", limit: int = 20_000
) -> str:
    return provider_toml(fake_llm.base_url) + f"""
[daemon]
max_reply_chars = {limit}

[agents.a]
provider = "fake"
model = "m"
autonomy = "{autonomy}"
tools = ["file_write"]

[agents.a.approval]
timeout_s = 20

[channels.bot]
kind = "telegram"
token = "env:TG_STREAM"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1
stream = {"true" if stream else "false"}
stream_edit_interval_s = {INTERVAL_S}

[[routes]]
channel = "bot"
agent = "a"
senders = ["*"]
reply_in_groups = "all"  # the group messages here are not addressed to the bot: streaming is tested, not the gate
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_STREAM", TOKEN)
    # Telegram's flood limit, under the configured interval: on a busy machine two requests paced
    # 0.3 s apart may arrive closer together (the first one was slow to reach the server).
    async with FakeTelegram(token=TOKEN, username="stream_bot", edit_gap_s=INTERVAL_S * 0.5) as fake:
        yield fake


@asynccontextmanager
async def started(path: Path) -> AsyncIterator[Runtime]:
    """Start as `serve` does: read the unfinished rows, start the channels, replay."""
    async with Runtime.open(load_config(path), config_path=path) as runtime:
        unfinished = runtime.store.unfinished()
        await start_channels(runtime, ready_timeout_s=10)
        await replay_unfinished(runtime, unfinished)
        yield runtime


def kinds(tg: FakeTelegram, chat: int, kind: str) -> list[str]:
    return [v.text for v in tg.visible if v.chat_id == chat and v.kind == kind]


def no_flood(tg: FakeTelegram) -> bool:
    return tg.rate_limited == 0 and not any(c.status == 429 for c in tg.requests)


async def test_a_private_chat_sees_drafts_grow_then_one_message(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(paced(text(ANSWER), over_s=2.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(USER, USER, "write slowly")
        await tg.wait_for(lambda: tg.sent, timeout=20)
        await runtime.drain(10)
    drafts = kinds(tg, USER, "draft")
    assert len(drafts) >= 3  # several visible updates while the model wrote
    assert all(later.startswith(earlier) for earlier, later in zip(drafts, drafts[1:]))  # progressively longer
    assert len({c["draft_id"] for c in tg.calls("sendMessageDraft")}) == 1  # one draft id per reply
    assert [p["text"] for p in tg.sent] == [ANSWER]  # then exactly one message: the stored answer
    assert tg.sent[0]["reply_parameters"]["message_id"] > 0  # answering the user's message
    assert no_flood(tg)


async def test_a_server_without_drafts_streams_private_replies_by_edits_and_says_why_once(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, debug_log: io.StringIO
) -> None:
    tg.without_drafts = True  # a self-hosted Bot API server older than sendMessageDraft
    second = "and the second answer, " + ANSWER
    fake_llm.script(paced(text(ANSWER), over_s=2.0), paced(text(second), over_s=2.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(USER, USER, "write slowly")
        await tg.wait_for(lambda: tg.shown(USER) == [ANSWER], timeout=20)
        tg.push_message(USER, USER, "once more")
        await tg.wait_for(lambda: tg.shown(USER) == [ANSWER, second], timeout=20)
        await runtime.drain(10)
    assert len(tg.calls("sendMessageDraft")) == 1  # the first reply found out; the second never tried
    assert len(kinds(tg, USER, "send")) == 2 and len(kinds(tg, USER, "edit")) >= 2  # posted, then edited
    log = debug_log.getvalue()
    assert log.count("has no sendMessageDraft") == 1 and "older than Bot API 9.3" in log
    assert "rejected the bot token" not in log
    assert no_flood(tg)


async def test_a_group_sees_one_message_edited_as_it_grows(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(paced(text(ANSWER), over_s=2.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: tg.shown(GROUP) == [ANSWER], timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    assert len(kinds(tg, GROUP, "send")) == 1
    edits = kinds(tg, GROUP, "edit")
    assert len(edits) >= 2 and edits[-1] == ANSWER
    assert tg.calls("sendMessageDraft") == []  # drafts are for private chats only
    assert no_flood(tg)


async def test_stream_false_sends_exactly_one_message(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(paced(text(ANSWER), over_s=1.0))
    async with started(write_config(bot_toml(fake_llm, tg, stream=False))) as runtime:
        tg.push_message(GROUP, USER, "no streaming", chat_type="group")
        await tg.wait_for(lambda: tg.sent, timeout=20)
        await runtime.drain(10)
    assert [v.kind for v in tg.visible] == ["send"]
    assert tg.shown(GROUP) == [ANSWER]
    assert "stream" not in fake_llm.requests[0] or fake_llm.requests[0]["stream"] is False


async def test_stop_mid_stream_ends_the_message_with_stopped(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(paced(text(ANSWER), over_s=4.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "edit"), timeout=20)
        tg.push_message(GROUP, USER, "/stop", chat_type="group")
        await tg.wait_for(lambda: any(t.endswith("Stopped.") for t in tg.shown(GROUP)), timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    [streamed] = [t for t in tg.shown(GROUP) if t.endswith("Stopped.")]
    assert streamed.startswith("word0") and ANSWER not in streamed  # the partial text, then the ending
    assert len(kinds(tg, GROUP, "send")) == 1  # no second reply beside the stopped one
    assert no_flood(tg)


async def test_a_model_failing_mid_stream_replaces_the_partial_text_with_the_failure(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(cut_off(paced(text(ANSWER), over_s=2.0), after=20))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: any("incident" in t for t in tg.shown(GROUP)), timeout=20)
        await runtime.drain(10)
    [final] = tg.shown(GROUP)  # the one streamed message, now saying what happened
    assert final.startswith("Sorry, the model provider failed") and "word0" not in final
    assert no_flood(tg)


async def test_a_crash_mid_stream_turns_the_half_shown_message_into_the_notice_once(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(bot_toml(fake_llm, tg))
    fake_llm.script(paced(text(ANSWER), over_s=6.0))
    async with started(path) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "edit"), timeout=20)
        (row,) = runtime.store.unfinished()
        assert row.state == "running" and len(row.stream) == 1  # the shown message is on record
    # The daemon died mid-stream (the runtime closed under the turn). The next start edits the
    # half-shown message into the notice, and Telegram redelivers the unconfirmed update, which
    # must not run the turn again.
    partial_id = int(row.stream[0])

    def noticed() -> bool:
        return [t[:31] for t in tg.shown(GROUP)] == ["I was restarted while answering"]

    for _ in range(2):  # and a second restart tells nobody anything twice
        async with started(path) as runtime:
            await tg.wait_for(noticed, timeout=20)
            await runtime.drain(10)
            assert runtime.store.unfinished() == []
    assert [v.id for v in tg.visible if v.chat_id == GROUP and v.text.startswith("I was restarted")] == [partial_id]
    assert len(kinds(tg, GROUP, "send")) == 1  # the partial message, now the notice; nothing below it
    assert len(fake_llm.requests) == 1


async def test_a_half_shown_message_deleted_before_the_restart_gets_the_notice_posted_anew(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(bot_toml(fake_llm, tg))
    fake_llm.script(paced(text(ANSWER), over_s=6.0))
    async with started(path) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "edit"), timeout=20)
        (row,) = runtime.store.unfinished()
    tg.delete_as_admin(int(row.stream[0]))  # an admin removed the half-shown message meanwhile
    async with started(path) as runtime:
        await tg.wait_for(lambda: len(kinds(tg, GROUP, "send")) == 2, timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    [notice] = tg.shown(GROUP)  # the edit was refused: the notice is posted instead, once
    assert notice.startswith('I was restarted while answering "write slowly"')
    assert len(fake_llm.requests) == 1


async def test_a_reconnect_during_a_stream_changes_nothing_the_user_sees(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(paced(text(ANSWER), over_s=3.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "edit"), timeout=20)
        tg.drop_connections()  # the long poll is cut; the adapter polls again
        tg.fail_next("getUpdates", status=502, description="Bad Gateway")
        await tg.wait_for(lambda: tg.shown(GROUP) == [ANSWER], timeout=20)
        await runtime.drain(10)
    assert len(kinds(tg, GROUP, "send")) == 1
    assert len(fake_llm.requests) == 1


async def test_an_approval_during_a_streamed_turn_is_its_own_message(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.script(
        paced(tool_call("file_write", {"path": "ok.txt", "content": "1"}, content="Writing it now."), over_s=0.5),
        paced(text("wrote it"), over_s=0.5),
    )
    async with started(write_config(bot_toml(fake_llm, tg, autonomy="supervised"))) as runtime:
        tg.push_message(USER, USER, "please write")
        await tg.wait_for(lambda: any("reply_markup" in p for p in tg.sent), timeout=20)
        # while the approval waits, the draft says so: the call does not run before a person said yes
        await tg.wait_for(lambda: any(d.endswith("waiting for approval of file_write...") for d in kinds(tg, USER, "draft")))
        assert not any("running file_write" in d for d in kinds(tg, USER, "draft"))
        tg.press_button(USER, "Approve")
        await tg.wait_for(lambda: [p["text"] for p in tg.sent][-1:] == ["wrote it"], timeout=20)
        await runtime.drain(10)
    drafts = kinds(tg, USER, "draft")
    assert drafts[-1] != drafts[-2] and "running" not in drafts[-1]  # the line went with the tool
    assert "waiting for approval" not in drafts[-1]
    assert "running file_write" not in tg.sent[-1]["text"]  # and not in the final text
    assert "waiting for approval" not in tg.sent[-1]["text"]
    [prompt] = [p for p in tg.sent if "reply_markup" in p]
    assert "Approval needed" in prompt["text"]  # its own message, with buttons
    assert [p["text"] for p in tg.sent if "wrote it" in p["text"]] == ["wrote it"]  # the answer, once
    assert no_flood(tg)


async def test_two_sessions_streaming_in_one_chat_never_interleave(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    first = " ".join(f"alpha{i}" for i in range(30))
    second = " ".join(f"beta{i}" for i in range(30))

    fake_llm.script(paced(text(first), over_s=2.0), paced(text(second), over_s=2.0))
    async with started(write_config(bot_toml(fake_llm, tg))) as runtime:
        tg.push_message(GROUP, USER, "one", chat_type="group")  # per-sender sessions: two at once
        tg.push_message(GROUP, OTHER, "two", chat_type="group")
        await tg.wait_for(lambda: sorted(tg.shown(GROUP)) == sorted([first, second]), timeout=30)
        await runtime.drain(10)
    by_message: dict[int, list[str]] = {}
    for change in tg.visible:
        by_message.setdefault(change.id, []).append(change.text)
    assert len(by_message) == 2
    for texts in by_message.values():
        final = texts[-1]
        assert all(final.startswith(t) for t in texts)  # each message only ever grew its own answer
    assert no_flood(tg)  # two streams in one chat share its pace


async def test_a_streamed_reply_past_its_limit_is_cut_with_the_note(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    long = " ".join(f"w{i:04d}" for i in range(600))  # 3,599 characters
    fake_llm.script(paced(text(long), over_s=1.0))
    async with started(write_config(bot_toml(fake_llm, tg, limit=1_000))) as runtime:
        tg.push_message(GROUP, USER, "say a lot", chat_type="group")
        await tg.wait_for(lambda: any("cut here" in t for t in tg.shown(GROUP)), timeout=20)
        await runtime.drain(10)
    [final] = tg.shown(GROUP)
    assert final.endswith("[The reply was cut here: 3,599 characters, the first 995 shown.]")
    assert all(len(v.text) <= 1_100 for v in tg.visible)  # the preview never passed the limit either


async def test_a_final_edit_that_outlives_its_deadline_is_completed_once_by_the_delivery_queue(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = bot_toml(fake_llm, tg).replace("[daemon]\n", "[daemon]\nreply_deadline_s = 1\n")
    path = write_config(toml)
    fake_llm.script(paced(text(ANSWER), over_s=2.0))
    async with started(path) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "send"), timeout=20)
        tg.fail_next("editMessageText", status=502, description="Bad Gateway", times=1000)
        # the edits keep failing: the queue closes the half-shown message and sends the answer anew
        await tg.wait_for(lambda: ANSWER in tg.shown(GROUP), timeout=30)
        await tg.wait_for(lambda: runtime.store.queued_replies() == 0 and runtime.idle.is_set(), timeout=10)
        assert runtime.store.unfinished() == []
    tg.heal("editMessageText")
    async with started(path) as runtime:  # a restart sends nothing more
        await runtime.drain(10)
    partial, notice, final = tg.shown(GROUP)
    assert ANSWER not in partial and partial.startswith("word0")  # the half-shown message, left as it was
    assert notice == RESENT  # said once
    assert final == ANSWER  # and the reply in full, once
    assert len(fake_llm.requests) == 1


async def _reload_mid_stream(path: Path, runtime: Runtime, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    """Change the channel's settings (so the reload restarts it) and reload, as SIGHUP does."""
    path.write_text(bot_toml(fake_llm, tg).replace("poll_timeout_s = 1", "poll_timeout_s = 2"))
    assert await reload_config(runtime, path)


async def test_a_reload_mid_stream_in_a_group_ends_the_streamed_message_as_the_answer(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(bot_toml(fake_llm, tg))
    fake_llm.script(paced(text(ANSWER), over_s=3.0))
    async with started(path) as runtime:
        tg.push_message(GROUP, USER, "write slowly", chat_type="group")
        await tg.wait_for(lambda: kinds(tg, GROUP, "edit"), timeout=20)
        old = runtime.channels.adapter("bot")
        await _reload_mid_stream(path, runtime, tg, fake_llm)
        assert runtime.channels.adapter("bot") is not old  # the channel was restarted
        await tg.wait_for(lambda: ANSWER in tg.shown(GROUP), timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    assert tg.shown(GROUP) == [ANSWER]  # the streamed message became the answer: no copy beside it
    assert len(kinds(tg, GROUP, "send")) == 1
    assert len(kinds(tg, GROUP, "edit")) >= 2  # it kept growing after the reload
    assert no_flood(tg)


async def test_a_reload_mid_stream_in_a_private_chat_ends_in_one_message(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(bot_toml(fake_llm, tg))
    fake_llm.script(paced(text(ANSWER), over_s=3.0))
    async with started(path) as runtime:
        tg.push_message(USER, USER, "write slowly")
        await tg.wait_for(lambda: kinds(tg, USER, "draft"), timeout=20)
        await _reload_mid_stream(path, runtime, tg, fake_llm)
        shown_before = len(kinds(tg, USER, "draft"))
        await tg.wait_for(lambda: tg.sent, timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []
    assert [p["text"] for p in tg.sent] == [ANSWER]  # one message, the stored answer
    assert len(kinds(tg, USER, "draft")) > shown_before  # the draft kept growing after the reload
    assert len({c["draft_id"] for c in tg.calls("sendMessageDraft")}) == 1  # still the one reply's draft
    assert no_flood(tg)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_reply_with_an_unpaired_surrogate_is_answered_with_a_replacement_character(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, stream: bool
) -> None:
    fake_llm.script(text("half a pair: \ud83d, a lone low: \ude00."))  # JSON's "\ud83d" escapes
    async with started(write_config(bot_toml(fake_llm, tg, stream=stream))) as runtime:
        tg.push_message(GROUP, USER, "say something odd", chat_type="group")
        await tg.wait_for(lambda: tg.shown(GROUP) == ["half a pair: \ufffd, a lone low: \ufffd."], timeout=20)
        await runtime.drain(10)
        assert runtime.store.unfinished() == []  # stored, sent and finished like any reply
