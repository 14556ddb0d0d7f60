"""Discord files through discord.py against FakeDiscord: attachments, CDN downloads, file posts."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from channels import (
    Attachment,
    AttachmentTooLarge,
    ChannelError,
    ChannelRefused,
    FileAdapter,
    Inbound,
    OutboundFile,
    create_adapter,
)
from channels.discord import DiscordAdapter
from orchestrator.config.channels import DiscordChannelConfig
from tests.fakes.discord_api import FakeDiscord
from tests.channels.conftest import Outbound
from tests.channels.downloads import download_to
from tests.fakes.loopback import serving

TOKEN = "good-token"
USER = "424242424242424242"
DM = "500000000000000001"
CHANNEL = "600000000000000001"
GUILD = "700000000000000001"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = b"%PDF-1.4\n" + b"0123456789" * 3000


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=TOKEN) as server:
        yield server


@pytest.fixture
async def adapter(fake: FakeDiscord) -> AsyncIterator[DiscordAdapter]:
    fields: dict[str, Any] = {
        "kind": "discord",
        "token": "env:DISCORD_BOT_TOKEN",
        "api_base_url": fake.api_base_url,
        "guild_ready_timeout_s": 0.05,
    }
    made = create_adapter("dc", DiscordChannelConfig.model_validate(fields), secrets=lambda ref: TOKEN)
    assert isinstance(made, DiscordAdapter)
    yield made
    await made.aclose()


@asynccontextmanager
async def connected(adapter: DiscordAdapter) -> AsyncIterator[asyncio.Queue[Any]]:
    """Run the adapter until the block ends; yield the queue of what it delivered."""
    items: asyncio.Queue[Any] = asyncio.Queue()
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tasks:
        task = tasks.create_task(adapter.run(items.put, ready.set))
        try:
            async with asyncio.timeout(10):
                await ready.wait()
            yield items
        finally:
            task.cancel()


async def next_item(items: asyncio.Queue[Any]) -> Any:
    async with asyncio.timeout(10):
        return await items.get()


def hosted(fake: FakeDiscord, content: bytes = PNG, name: str = "photo.png", mime: str = "image/png") -> Attachment:
    obj = fake.cdn.attachment(channel_id=DM, filename=name, content=content, content_type=mime)
    return Attachment(kind="image", mime=mime, handle=obj["url"], size=len(content), name=name)


# -- inbound attachments ------------------------------------------------------------------------


async def test_attachments_without_text_are_a_message(fake: FakeDiscord, adapter: DiscordAdapter) -> None:
    cdn = fake.cdn
    photo = cdn.attachment(channel_id=DM, filename="photo.png", content=PNG, content_type="image/png")
    paper = cdn.attachment(channel_id=DM, filename="paper.pdf", content=PDF, content_type="application/pdf")
    note = cdn.attachment(channel_id=DM, filename="voice-message.ogg", content=b"Ogg" * 50, content_type="audio/ogg", voice=True)
    clip = cdn.attachment(channel_id=DM, filename="clip.mp4", content=b"mp4" * 10, content_type="video/mp4")
    untyped = cdn.attachment(channel_id=DM, filename="notes.txt", content=b"hi", content_type=None)
    async with connected(adapter) as items:
        await fake.push_message(DM, USER, "", attachments=[photo, paper, note, clip, untyped])
        item = await next_item(items)
    assert isinstance(item, Inbound) and item.text == "" and item.is_direct
    got = [(a.kind, a.mime, a.size, a.name, a.handle) for a in item.attachments]
    assert got == [
        ("image", "image/png", len(PNG), "photo.png", photo["url"]),
        ("document", "application/pdf", len(PDF), "paper.pdf", paper["url"]),
        ("voice", "audio/ogg", 150, "voice-message.ogg", note["url"]),
        ("video", "video/mp4", 30, "clip.mp4", clip["url"]),
        ("document", "text/plain", 2, "notes.txt", untyped["url"]),  # no content_type: guessed from the name
    ]
    assert fake.cdn.downloads == 0


async def test_a_guild_attachment_is_delivered_with_whether_it_mentions_the_bot(
    fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    # the route's group gate (the core) drops the unmentioned one; the adapter reports the fact
    await fake.add_guild(GUILD, text_channels=[CHANNEL])
    photo = fake.cdn.attachment(channel_id=CHANNEL, filename="p.png", content=PNG, content_type="image/png")
    async with connected(adapter) as items:
        await fake.push_message(CHANNEL, USER, "", guild_id=GUILD, attachments=[photo])
        await fake.push_message(CHANNEL, USER, f"<@{fake.bot_id}>", guild_id=GUILD, mentions=[fake.bot_id], attachments=[photo])
        plain, mentioned = await next_item(items), await next_item(items)
    for item in (plain, mentioned):
        assert isinstance(item, Inbound) and item.text == "" and [a.kind for a in item.attachments] == ["image"]
    assert isinstance(plain, Inbound) and isinstance(mentioned, Inbound)
    assert (plain.mentions_bot, mentioned.mentions_bot) == (False, True)


# -- downloads ----------------------------------------------------------------------------------


async def test_download_streams_from_the_cdn_without_the_token(fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path) -> None:
    assert isinstance(adapter, FileAdapter) and adapter.max_file_bytes == 10 * 1024 * 1024
    dest = tmp_path / "photo.png"
    assert await download_to(adapter, hosted(fake), dest, max_bytes=10_000_000) == len(PNG)
    assert dest.read_bytes() == PNG and fake.cdn.downloads == 1 and fake.cdn.served[0].completed
    assert not [r for r in fake.requests if "Authorization" in r.headers and r.path.startswith("/attachments")]


@pytest.mark.parametrize("chunked", [False, True], ids=["declared-size", "undeclared-size"])
async def test_download_stops_at_the_cap_and_removes_the_file(
    fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path, chunked: bool
) -> None:
    fake.cdn.chunked = chunked
    big = b"y" * (16 * 1024 * 1024)  # far more than loopback socket buffers hold
    dest = tmp_path / "big.bin"
    with pytest.raises(AttachmentTooLarge):
        await download_to(adapter, hosted(fake, big, "big.bin", "application/octet-stream"), dest, max_bytes=100_000)
    assert not dest.exists()
    served = fake.cdn.served[-1]
    async with asyncio.timeout(10):
        await served.finished.wait()  # the fake's handler ends once it sees the connection closed
    assert not served.completed and served.sent < len(big)


async def test_a_tampered_or_expired_link_is_refused(fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path) -> None:
    good = hosted(fake)
    forged = Attachment(kind="image", mime="image/png", handle=good.handle.replace("hm=", "hm=0"))
    with pytest.raises(ChannelRefused, match="HTTP 404"):
        await download_to(adapter, forged, tmp_path / "x", max_bytes=10_000_000)
    assert fake.cdn.refused == 1 and fake.cdn.downloads == 0 and not (tmp_path / "x").exists()


async def test_cdn_failures_and_stalls_are_retryable_channel_errors(
    fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path
) -> None:
    attachment = hosted(fake)
    fake.cdn.fail_next_download(status=502)
    with pytest.raises(ChannelError, match="HTTP 502") as failed:
        await download_to(adapter, attachment, tmp_path / "a", max_bytes=10_000_000)
    fake.cdn.stall_next_download(30.0)
    adapter.download_idle_timeout_s = 0.3
    with pytest.raises(ChannelError, match="stalled") as stalled:
        await download_to(adapter, attachment, tmp_path / "b", max_bytes=10_000_000)
    assert not isinstance(failed.value, ChannelRefused) and not isinstance(stalled.value, ChannelRefused)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert await download_to(adapter, attachment, tmp_path / "c", max_bytes=10_000_000) == len(PNG)


async def test_only_discord_hosts_are_fetched(adapter: DiscordAdapter, tmp_path: Path) -> None:
    seen: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(body=b"internal secrets")

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    async with serving(app) as origin:
        for handle in (f"{origin}/attachments/1/2/x.png", "http://cdn.discordapp.com/a.png", "https://cdn.discordapp.com.evil.example/a"):
            with pytest.raises(ChannelRefused, match="not a Discord CDN URL"):
                await download_to(adapter, Attachment(kind="image", mime="image/png", handle=handle), tmp_path / "x", max_bytes=100)
    assert seen == [] and not (tmp_path / "x").exists()


async def test_a_cdn_refusal_or_redirect_is_refused_and_a_redirect_not_followed(
    fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path
) -> None:
    seen: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(body=PNG)

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    attachment = hosted(fake)
    async with serving(app) as origin:
        fake.cdn.fail_next_download(status=403)
        with pytest.raises(ChannelRefused, match="HTTP 403"):
            await download_to(adapter, attachment, tmp_path / "a", max_bytes=10_000_000)
        fake.cdn.redirect_next_download(f"{origin}/moved.png")
        with pytest.raises(ChannelRefused, match="redirected.*moved.png.*not followed"):
            await download_to(adapter, attachment, tmp_path / "b", max_bytes=10_000_000)
    assert seen == [] and not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


async def test_a_cdn_that_compresses_still_yields_the_file_as_sent(
    fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path
) -> None:
    notes = b"meeting notes\n" * 4000  # text a CDN would gzip for a client that accepts it
    fake.cdn.compress = True
    dest = tmp_path / "notes.txt"
    assert await download_to(adapter, hosted(fake, notes, "notes.txt", "text/plain"), dest, max_bytes=10_000_000) == len(notes)
    assert dest.read_bytes() == notes and fake.cdn.accept_encodings == ["identity"]


# -- posting files ------------------------------------------------------------------------------


async def test_send_file_posts_an_image_and_a_document_as_multipart(
    fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path, outbound: Outbound
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    caption = "here " + "x" * 2500  # longer than one message: the rest follows the file
    async with connected(adapter):
        first = await adapter.send_file(
            outbound(chat=DM, path=tmp_path / "chart.png", name="chart.png", mime="image/png", caption=caption)
        )
        second = await adapter.send_file(
            outbound(chat=DM, path=tmp_path / "report.pdf", name="report.pdf", mime="application/pdf")
        )
    posts = fake.created_messages
    assert [p["id"] for p in posts if "files" in p] == [first, second]
    assert [(f.field, f.filename, f.content) for p in posts if "files" in p for f in p["files"]] == [
        ("files[0]", "chart.png", PNG),
        ("files[0]", "report.pdf", PDF),
    ]
    assert [p["attachments"][0]["filename"] for p in posts if "files" in p] == ["chart.png", "report.pdf"]
    assert "".join(p.get("content") or "" for p in posts) == caption and len(posts) == 3
    assert posts[0]["files"] and not posts[1].get("files")  # the caption's rest follows the file


async def test_send_file_over_the_limit_is_refused(fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path, outbound: Outbound) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"z" * (10 * 1024 * 1024 + 1))
    file = outbound(chat=DM, path=big, name="big.bin", mime="application/octet-stream")
    async with connected(adapter):
        with pytest.raises(ChannelRefused, match="at most 10485760"):
            await adapter.send_file(file)
        assert not [r for r in fake.requests if r.files]  # refused before any upload
        # what the platform refuses (a lower limit than ours, no permission) is a refusal too
        small = tmp_path / "small.txt"
        small.write_bytes(b"hi")
        fake.fail_next("POST", "/channels/{id}/messages", status=403)
        with pytest.raises(ChannelRefused, match="HTTP 403"):
            await adapter.send_file(outbound(chat=DM, path=small, name="small.txt", mime="text/plain"))


async def test_the_fake_refuses_an_oversize_multipart_post_like_discord(fake: FakeDiscord, tmp_path: Path) -> None:
    form = aiohttp.FormData()
    form.add_field("payload_json", '{"content": "x"}', content_type="application/json")
    form.add_field("files[0]", io.BytesIO(b"z" * (10 * 1024 * 1024 + 1)), filename="big.bin", content_type="application/octet-stream")
    async with aiohttp.ClientSession() as session:
        url = f"{fake.api_base_url}/channels/{DM}/messages"
        async with session.post(url, data=form, headers={"Authorization": f"Bot {TOKEN}"}) as response:
            assert response.status == 413 and (await response.json())["code"] == 40005
    assert fake.created_messages == []
