"""Telegram attachments through python-telegram-bot against the fake Bot API: in, down, and back out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels import AttachmentTooLarge, ChannelRefused, FileAdapter, Inbound, OutboundFile, create_adapter
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig
from tests.channels.conftest import Outbound
from tests.channels.downloads import download_to
from tests.fakes.telegram_api import FakeTelegram
from tests.media.samples import JPEG, PDF



@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def adapter(fake: FakeTelegram) -> AsyncIterator[FileAdapter]:
    config = TelegramChannelConfig.model_validate(
        {"kind": "telegram", "token": "env:TG", "api_base_url": fake.api_base_url, "poll_timeout_s": 1.0}
    )

    def secrets(ref: SecretRef) -> str:
        return fake.token

    made = create_adapter("tg", config, secrets=secrets)
    assert isinstance(made, FileAdapter)
    yield made
    await made.aclose()  # type: ignore[attr-defined]


async def receive(adapter: FileAdapter, count: int = 1) -> list[Inbound]:
    """Run the adapter until it delivered `count` messages; return them."""
    items: list[Inbound] = []

    async def deliver(item: object, /, *, synced: bool = True) -> None:
        assert isinstance(item, Inbound)
        items.append(item)

    task = asyncio.create_task(adapter.run(deliver, lambda: None))  # type: ignore[attr-defined]
    try:
        async with asyncio.timeout(5):
            while len(items) < count:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return items


async def test_a_captionless_photo_is_a_message_with_an_image(fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path) -> None:
    fake.push_photo(chat_id=42, user_id=7, data=JPEG)
    (item,) = await receive(adapter)
    assert item.text == ""
    (image,) = item.attachments
    assert (image.kind, image.mime, image.size) == ("image", "image/jpeg", len(JPEG))
    assert fake.downloads == 0  # receiving fetches nothing
    dest = tmp_path / "photo.jpg"
    assert await download_to(adapter, image, dest, max_bytes=1_000_000) == len(JPEG)
    assert dest.read_bytes() == JPEG
    assert fake.downloads == 1


async def test_documents_voice_audio_and_video_notes_arrive_with_their_kinds(fake: FakeTelegram, adapter: FileAdapter) -> None:
    fake.push_document(42, 7, PDF, file_name="report.pdf", mime_type="application/pdf", caption="see this")
    fake.push_voice(42, 7, b"OggS voice")
    fake.push_audio(42, 7, b"ID3 song")
    fake.push_video_note(42, 7, b"\x00\x00\x00\x18ftypmp42")
    items = await receive(adapter, 4)
    assert items[0].text == "see this"
    kinds = [(a.kind, a.mime, a.name) for item in items for a in item.attachments]
    assert kinds[0] == ("document", "application/pdf", "report.pdf")
    assert [k for k, _, _ in kinds] == ["document", "voice", "audio", "video"]
    assert kinds[1][1] == "audio/ogg" and kinds[3][1] == "video/mp4"


async def test_a_file_larger_than_it_claims_is_cut_off_while_streaming(fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path) -> None:
    big = b"%PDF-1.4\n" + b"x" * 18_000_000  # more than loopback socket buffers hold
    fake.push_document(42, 7, big, file_name="big.pdf", mime_type="application/pdf", reported_size=1000)
    (item,) = await receive(adapter)
    dest = tmp_path / "big.pdf"
    with pytest.raises(AttachmentTooLarge):
        await download_to(adapter, item.attachments[0], dest, max_bytes=100_000)
    assert not dest.exists()
    assert fake.downloads == 1
    assert fake.downloaded_bytes < len(big)  # the fake stopped being read once the cap passed


async def test_a_file_declared_too_large_is_refused_before_any_byte(fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path) -> None:
    fake.push_document(42, 7, PDF, file_name="r.pdf", mime_type="application/pdf", reported_size=5_000_000)
    (item,) = await receive(adapter)
    with pytest.raises(AttachmentTooLarge):
        await download_to(adapter, item.attachments[0], tmp_path / "r.pdf", max_bytes=1_000_000)
    assert fake.downloads == 0 and fake.calls("getFile") == []


async def test_send_file_posts_photos_and_documents_as_multipart(fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound) -> None:
    photo, doc = tmp_path / "chart.jpg", tmp_path / "notes.txt"
    photo.write_bytes(JPEG)
    doc.write_text("hello", encoding="utf-8")
    first = await adapter.send_file(outbound(chat="42", path=photo, name="chart.jpg", mime="image/jpeg", caption="a chart"))
    second = await adapter.send_file(outbound(chat="42", path=doc, name="notes.txt", mime="text/plain"))
    assert [u["method"] for u in fake.uploads] == ["sendPhoto", "sendDocument"]
    assert fake.uploads[0]["data"] == JPEG and fake.uploads[0]["caption"] == "a chart"
    assert fake.uploads[1]["data"] == b"hello" and fake.uploads[1]["filename"] == "notes.txt"
    assert [first, second] == [str(u["message_id"]) for u in fake.uploads]


async def test_an_upload_the_platform_refuses_is_a_refusal(fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound) -> None:
    doc = tmp_path / "notes.txt"
    doc.write_text("hello", encoding="utf-8")
    fake.fail_next("sendDocument", status=400, description="Bad Request: chat not found")
    with pytest.raises(ChannelRefused, match="(?i)chat not found"):
        await adapter.send_file(outbound(chat="42", path=doc, name="notes.txt", mime="text/plain"))
