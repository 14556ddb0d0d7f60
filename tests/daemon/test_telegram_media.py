"""Pictures, files and voice through the daemon: real PTB adapters, FakeTelegram, the fake LLM.

One bot per agent: `seer` sees and takes images, documents and voice (and may send files),
`blind` takes images but its model cannot see, `plain` has no media policy at all.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from channels import Attachment, Inbound
from orchestrator.daemon import Runtime, replay_unfinished
from tests.conftest import WriteConfig
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call
from tests.fakes.telegram_api import FakeTelegram
from tests.media.samples import JPEG, OGG, PDF, PDF_TEXT, PNG, png

SEER, BLIND, PLAIN = "111111:seer-bot", "222222:blind-bot", "333333:plain-bot"
ALICE = 10


def media_toml(fake_llm: FakeOpenAI, tg: FakeTelegram, *, seer_media: str = "") -> str:
    bots = "".join(
        f'\n[channels.{name}]\nkind = "telegram"\ntoken = "env:TG_{name.upper()}"\n'
        f'api_base_url = "{tg.api_base_url}"\npoll_timeout_s = 1\n\n[[routes]]\nchannel = "{name}"\nagent = "{name}"\n'
        f'senders = ["*"]\n'
        for name in ("seer", "blind", "plain")
    )
    return f"""
[providers.fake]
base_url = "{fake_llm.base_url}"
max_retries = 0
transcription_model = "whisper-1"

[agents.seer]
provider = "fake"
model = "seer-model"
autonomy = "full"
vision = true
tools = ["file_read", "file_write", "send_file"]

[agents.seer.media]
accept = ["image", "document", "voice"]
image_detail = "low"
echo_transcript = true
{seer_media}

[agents.blind]
provider = "fake"
model = "blind-model"
autonomy = "full"

[agents.blind.media]
accept = ["image"]

[agents.plain]
provider = "fake"
model = "plain-model"
autonomy = "full"
tools = ["send_file"]
""" + bots


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    for name, token in (("SEER", SEER), ("BLIND", BLIND), ("PLAIN", PLAIN)):
        monkeypatch.setenv(f"TG_{name}", token)
    async with FakeTelegram(token=SEER, username="seer_bot") as fake:
        fake.add_bot(BLIND, username="blind_bot")
        fake.add_bot(PLAIN, username="plain_bot")
        yield fake


def said(tg: FakeTelegram, token: str) -> list[str]:
    return [p["text"] for p in tg.calls("sendMessage", token=token)]


def workspace(runtime: Runtime, agent: str) -> Path:
    return runtime.config.state_path().with_name("state-workspaces") / agent


def uploads(runtime: Runtime, agent: str) -> list[Path]:
    root = workspace(runtime, agent) / "uploads"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def stored_messages(runtime: Runtime) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, agent, _count in list(runtime.store.sessions()):
        session_id = runtime.store.find_session(key, agent)
        assert session_id is not None
        out.extend(runtime.store.load_messages(session_id)[0])
    return out


async def test_a_captionless_photo_is_answered_by_a_vision_agent(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        fake_llm.script(text("a white square"))
        tg.push_photo(ALICE, ALICE, JPEG, token=SEER)
        await tg.wait_for(lambda: "a white square" in said(tg, SEER), timeout=15)
        (image,) = [p for p in fake_llm.parts[-1] if p["type"] == "image_url"]
        assert image["image_url"] == {"url": "data:image/jpeg;base64," + base64.b64encode(JPEG).decode(), "detail": "low"}
        (saved,) = uploads(runtime, "seer")
        assert saved.read_bytes() == JPEG and saved.parent.name == date.today().isoformat()
        # the transcript holds a reference, never the bytes
        stored = json.dumps(stored_messages(runtime))
        assert base64.b64encode(JPEG).decode() not in stored
        (user,) = [m for m in stored_messages(runtime) if m["role"] == "user"]
        assert user["media"] == [{"kind": "image", "mime": "image/jpeg", "size": len(JPEG),
                                  "path": str(saved.relative_to(workspace(runtime, "seer")))}]
    assert tg.downloads == 1


async def test_an_image_leaves_the_request_with_the_history_window(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = media_toml(fake_llm, tg) + "\n[agents.seer.budget]\nmax_history_messages = 2\n"
    async with daemon(write_config(toml)):
        fake_llm.script(text("a square"), text("still a square"))
        tg.push_photo(ALICE, ALICE, JPEG, caption="look", token=SEER)
        await tg.wait_for(lambda: len(said(tg, SEER)) == 1, timeout=15)
        assert any(p["type"] == "image_url" for p in fake_llm.parts[-1])
        tg.push_message(ALICE, ALICE, "and now?", token=SEER)
        await tg.wait_for(lambda: len(said(tg, SEER)) == 2, timeout=15)
        assert fake_llm.parts[-1] == []  # the picture's message is out of the window: not re-sent


async def test_a_text_only_agent_refuses_a_photo_politely_without_downloading(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        tg.push_photo(ALICE, ALICE, JPEG, token=BLIND)
        tg.push_photo(ALICE, ALICE, JPEG, caption="what is this?", token=PLAIN)
        await tg.wait_for(lambda: said(tg, BLIND) and said(tg, PLAIN), timeout=15)
        assert said(tg, BLIND) == ["This agent cannot look at pictures; please describe it in words instead."]
        assert said(tg, PLAIN) == ["I can't take files here."]
        assert uploads(runtime, "blind") == [] and uploads(runtime, "plain") == []
    assert tg.downloads == 0 and tg.calls("getFile", token=BLIND) == [] and tg.calls("getFile", token=PLAIN) == []
    assert fake_llm.requests == []


def read_extract(request: dict[str, Any]) -> Reply:
    """Call file_read on the extract the intake announced (the model only knows what it was told)."""
    if request["messages"][-1]["role"] == "tool":
        return text("the report says: " + request["messages"][-1]["content"][-60:])
    user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    (path,) = re.findall(r"is in (uploads/.+?\.pdf\.txt)", user)
    return tool_call("file_read", {"path": path})


async def test_a_pdf_lands_in_the_workspace_and_file_read_reads_its_text(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.default = read_extract
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        tg.push_document(ALICE, ALICE, PDF, file_name="../../Q3 report.pdf", mime_type="application/pdf", token=SEER)
        await tg.wait_for(lambda: said(tg, SEER), timeout=15)
        pdf, extract = uploads(runtime, "seer")
        assert pdf.name == "Q3 report.pdf" and pdf.read_bytes() == PDF  # the name is sanitised, inside the jail
        assert extract.name == "Q3 report.pdf.txt" and PDF_TEXT in extract.read_text()
    assert PDF_TEXT in fake_llm.requests[-1]["messages"][-1]["content"]
    assert said(tg, SEER)[0].startswith("the report says:")


async def test_a_voice_note_is_transcribed_echoed_and_answered(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.transcript = "remind me to water the plants"
    async with daemon(write_config(media_toml(fake_llm, tg))):
        fake_llm.script(text("I will remind you."))
        tg.push_voice(ALICE, ALICE, OGG, token=SEER)
        await tg.wait_for(lambda: "I will remind you." in said(tg, SEER), timeout=15)
    (call,) = fake_llm.transcriptions
    assert (call["model"], call["size"], call["content_type"]) == ("whisper-1", len(OGG), "audio/ogg")
    user = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
    assert "transcription" in user and "remind me to water the plants" in user
    assert said(tg, SEER) == ["🎙️ “remind me to water the plants”", "I will remind you."]


async def test_a_voice_note_without_a_transcription_model_gets_one_clear_reply(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = media_toml(fake_llm, tg).replace('transcription_model = "whisper-1"\n', "")
    async with daemon(write_config(toml)) as runtime:
        tg.push_voice(ALICE, ALICE, OGG, token=SEER)
        await tg.wait_for(lambda: said(tg, SEER), timeout=15)
        assert said(tg, SEER) == ["I can't listen to voice messages here: no transcription model is configured."]
        assert uploads(runtime, "seer") == []
    assert tg.downloads == 0 and fake_llm.requests == []


async def test_a_failed_transcription_keeps_nothing(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    fake_llm.transcription_status = 500
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        tg.push_voice(ALICE, ALICE, OGG, token=SEER)
        await tg.wait_for(lambda: said(tg, SEER), timeout=15)
        assert said(tg, SEER) == ["I could not transcribe the voice message; please try again or type it."]
        assert uploads(runtime, "seer") == []
    assert fake_llm.requests == []


async def test_oversize_is_refused_while_streaming_and_nothing_is_kept(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = media_toml(fake_llm, tg, seer_media="max_bytes = 100000")
    big = b"%PDF-1.4\n" + b"x" * 3_000_000
    async with daemon(write_config(toml)) as runtime:
        # the message understates the size, so only the streaming cap can catch it
        tg.push_document(ALICE, ALICE, big, file_name="big.pdf", mime_type="application/pdf", reported_size=5000, token=SEER)
        await tg.wait_for(lambda: said(tg, SEER), timeout=15)
        assert said(tg, SEER) == ["That file is too large: the limit is 100,000 bytes."]
        assert uploads(runtime, "seer") == []
        assert not list((workspace(runtime, "seer") / "uploads").rglob(".partial-*"))
    assert tg.downloads == 1 and fake_llm.requests == []


async def test_a_damaged_image_and_an_unknown_file_type_get_one_reply_each(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        tg.push_photo(ALICE, ALICE, b"this is not a jpeg at all", token=SEER)
        await tg.wait_for(lambda: len(said(tg, SEER)) == 1, timeout=15)
        tg.push_document(ALICE, ALICE, b"MZ\x90\x00", file_name="setup.exe", mime_type="application/x-msdownload", token=SEER)
        await tg.wait_for(lambda: len(said(tg, SEER)) == 2, timeout=15)
        assert uploads(runtime, "seer") == []
    assert said(tg, SEER) == [
        "That picture looks damaged (it is not the image it claims to be); I could not read it.",
        "I can't read files of type application/x-msdownload.",
    ]
    assert fake_llm.requests == [] and tg.downloads == 1  # the .exe was refused by type, unfetched


async def test_send_file_posts_a_workspace_file_to_the_chat(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        workspace(runtime, "seer").mkdir(parents=True, exist_ok=True)
        (workspace(runtime, "seer") / "chart.png").write_bytes(PNG)
        fake_llm.script(
            tool_call("send_file", {"path": "chart.png", "caption": "your chart"}),
            tool_call("send_file", {"path": "../../etc/passwd"}),
            text("sent"),
        )
        tg.push_message(ALICE, ALICE, "send me the chart", token=SEER)
        await tg.wait_for(lambda: "sent" in said(tg, SEER), timeout=15)
    (upload,) = tg.uploads
    assert (upload["method"], upload["chat_id"], upload["caption"]) == ("sendPhoto", ALICE, "your chart")
    assert upload["data"] == PNG
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("sent chart.png") and "refused" in results[1]


async def test_send_file_posts_a_long_phone_screenshot_as_a_document(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    shot = png(1080, 25000)  # width + height 26,080 and a ratio of 23: not a photo for Telegram
    async with daemon(write_config(media_toml(fake_llm, tg))) as runtime:
        workspace(runtime, "seer").mkdir(parents=True, exist_ok=True)
        (workspace(runtime, "seer") / "screenshot.png").write_bytes(shot)
        fake_llm.script(tool_call("send_file", {"path": "screenshot.png", "caption": "the whole page"}), text("sent"))
        tg.push_message(ALICE, ALICE, "send me the screenshot", token=SEER)
        await tg.wait_for(lambda: "sent" in said(tg, SEER), timeout=15)
    (upload,) = tg.uploads
    assert (upload["method"], upload["filename"], upload["caption"]) == ("sendDocument", "screenshot.png", "the whole page")
    assert upload["data"] == shot and tg.calls("sendPhoto", token=SEER) == []
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("sent screenshot.png")


async def test_a_replayed_message_keeps_its_attachments(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(media_toml(fake_llm, tg))
    async with daemon(path) as runtime:
        # accepted by a previous process that died before running it: the row is all that is left
        update = tg.push_photo(ALICE, ALICE, JPEG, token=BLIND)  # fetched only by this test
        photo = update["message"]["photo"][-1]
        inbound = Inbound(
            channel="seer", chat=str(ALICE), sender=str(ALICE), text="", event_id="replayed-1", is_direct=True,
            attachments=(Attachment(kind="image", mime="image/jpeg", handle=photo["file_id"], size=len(JPEG)),),
        )
        runtime.store.accept("seer", "replayed-1", dataclasses.asdict(inbound))
        fake_llm.script(text("seen after the restart"))
        (row,) = [r for r in runtime.store.unfinished() if r.event_id == "replayed-1"]
        await replay_unfinished(runtime, [row])
        await tg.wait_for(lambda: "seen after the restart" in said(tg, SEER), timeout=15)
        assert any(p["type"] == "image_url" for p in fake_llm.parts[-1])
