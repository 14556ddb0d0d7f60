"""Telegram attachments through python-telegram-bot against the fake Bot API: in, down, and back out."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from channels import AttachmentTooLarge, ChannelRefused, FileAdapter, Inbound, OutboundFile, create_adapter
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig
from tests.channels.conftest import Outbound
from tests.channels.downloads import download_to
from tests.fakes.telegram_api import FakeTelegram
from tests.media.samples import JPEG, PDF, jpeg_header, png



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


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def _webp(width: int, height: int) -> bytes:  # the extended (VP8X) header: canvas width-1 and height-1, 24 bits
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4 + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


async def test_a_long_phone_screenshot_goes_out_as_a_document(
    fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound
) -> None:
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(png(1080, 25000))  # 26,080 px in total, a ratio of 23: Telegram will not take it as a photo
    sent = await adapter.send_file(outbound(chat="42", path=shot, name="screenshot.png", mime="image/png"))
    assert [(u["method"], u["filename"]) for u in fake.uploads] == [("sendDocument", "screenshot.png")]
    assert fake.calls("sendPhoto") == []  # checked before sending: no upload wasted on a refusal
    assert sent == str(fake.uploads[0]["message_id"])


@pytest.mark.parametrize(
    ("name", "image", "method"),
    [
        ("phone.png", png(1080, 1920), "sendPhoto"),
        ("square.png", png(5000, 5000), "sendPhoto"),  # 10,000 in total: the most Telegram takes
        ("wider.png", png(5001, 5000), "sendDocument"),
        ("banner.png", png(4000, 200), "sendPhoto"),  # a ratio of 20: the most Telegram takes
        ("strip.png", png(4000, 199), "sendDocument"),
        ("photo.jpg", jpeg_header(4000, 3000), "sendPhoto"),
        ("panorama.jpg", jpeg_header(9000, 1200), "sendDocument"),
        ("anim.gif", _gif(480, 270), "sendPhoto"),
        ("ribbon.gif", _gif(2100, 100), "sendDocument"),
        ("sticker.webp", _webp(512, 512), "sendPhoto"),
        ("poster.webp", _webp(8000, 4000), "sendDocument"),
        ("broken.png", b"\x89PNG\r\n\x1a\nnot really", "sendDocument"),  # no size to read: not a photo Telegram takes
    ],
)
async def test_an_image_is_a_photo_only_within_telegrams_rules(
    fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound, name: str, image: bytes, method: str
) -> None:
    path = tmp_path / name
    path.write_bytes(image)
    mime = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}[name.rsplit(".", 1)[1]]
    await adapter.send_file(outbound(chat="42", path=path, name=name, mime=mime))
    assert [u["method"] for u in fake.uploads] == [method]
    assert len(fake.calls("sendPhoto")) == (method == "sendPhoto")  # never refused, never retried


async def test_a_photo_telegram_refuses_is_sent_again_as_a_document(
    fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound
) -> None:
    path = tmp_path / "chart.png"
    path.write_bytes(png(800, 600))
    # a rule this side does not know of (or a server stricter than the documentation)
    fake.fail_next("sendPhoto", status=400, description="Bad Request: PHOTO_INVALID_DIMENSIONS")
    sent = await adapter.send_file(outbound(chat="42", path=path, name="chart.png", mime="image/png", caption="the chart"))
    assert len(fake.calls("sendPhoto")) == 1
    assert [(u["method"], u["caption"]) for u in fake.uploads] == [("sendDocument", "the chart")]
    assert fake.uploads[0]["data"] == path.read_bytes() and sent == str(fake.uploads[0]["message_id"])


async def test_a_photo_refused_for_another_reason_is_not_sent_again(
    fake: FakeTelegram, adapter: FileAdapter, tmp_path: Path, outbound: Outbound
) -> None:
    path = tmp_path / "chart.png"
    path.write_bytes(png(800, 600))
    fake.fail_next("sendPhoto", status=400, description="Bad Request: chat not found")
    with pytest.raises(ChannelRefused, match="(?i)chat not found"):
        await adapter.send_file(outbound(chat="42", path=path, name="chart.png", mime="image/png"))
    assert fake.uploads == [] and fake.calls("sendDocument") == []


@pytest.mark.parametrize(
    ("image", "description"),
    [
        (png(1080, 25000), "Bad Request: PHOTO_INVALID_DIMENSIONS"),
        (png(4000, 150), "Bad Request: PHOTO_INVALID_DIMENSIONS"),
        (b"\x89PNG\r\n\x1a\nnot really", "Bad Request: IMAGE_PROCESS_FAILED"),
    ],
)
async def test_the_fake_refuses_a_photo_as_the_bot_api_does(fake: FakeTelegram, image: bytes, description: str) -> None:
    form = aiohttp.FormData()
    form.add_field("chat_id", "42")
    form.add_field("photo", image, filename="x.png", content_type="image/png")
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{fake.api_base_url}/bot{fake.token}/sendPhoto", data=form) as response:
            body = await response.json()
    assert (response.status, body["description"]) == (400, description)
    assert fake.uploads == []
