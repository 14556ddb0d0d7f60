"""Slack files through slack-bolt / slack_sdk against FakeSlack: attachments, downloads, uploads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from channels import (
    Attachment,
    AttachmentTooLarge,
    ChannelAuthError,
    ChannelError,
    ChannelRefused,
    FileAdapter,
    Inbound,
    OutboundFile,
    create_adapter,
)
from channels.slack import SlackAdapter
from orchestrator.config.channels import SlackChannelConfig
from tests.channels.conftest import Outbound
from tests.channels.downloads import download_to
from tests.fakes.loopback import serving
from tests.fakes.slack_api import FakeSlack, mention_event

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = b"%PDF-1.4\n" + b"0123456789" * 3000


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def make_adapter(fake: FakeSlack, *, bot_token: str | None = None) -> SlackAdapter:
    secrets = {"env:BOT": bot_token or fake.bot_token, "env:APP": fake.app_token}
    settings: dict[str, Any] = {
        "kind": "slack",
        "bot_token": "env:BOT",
        "app_token": "env:APP",
        "api_base_url": fake.api_base_url,
        "socket_ping_interval_s": 0.2,
    }
    adapter = create_adapter("work", SlackChannelConfig.model_validate(settings), secrets=lambda ref: secrets[ref])
    assert isinstance(adapter, SlackAdapter)
    return adapter


@asynccontextmanager
async def running(fake: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, asyncio.Queue[Any]]]:
    """Run a Socket Mode adapter until the block ends; yield it and what it delivered."""
    adapter = make_adapter(fake)
    items: asyncio.Queue[Any] = asyncio.Queue()
    ready = asyncio.Event()
    async with adapter, asyncio.TaskGroup() as tasks:
        task = tasks.create_task(adapter.run(items.put, ready.set))
        async with asyncio.timeout(10):
            await ready.wait()
        await fake.wait_connections(1)
        try:
            yield adapter, items
        finally:
            task.cancel()


async def next_item(items: asyncio.Queue[Any]) -> Any:
    async with asyncio.timeout(10):
        return await items.get()


def hosted(fake: FakeSlack, content: bytes = PNG, name: str = "photo.png", mime: str = "image/png") -> Attachment:
    obj = fake.files.add(name, content, mimetype=mime)
    return Attachment(kind="image", mime=mime, handle=obj["url_private"], size=len(content), name=name)


# -- inbound attachments ------------------------------------------------------------------------


async def test_a_file_without_text_is_a_message_with_its_attachments(fake: FakeSlack) -> None:
    photo = fake.files.add("photo.png", PNG, mimetype="image/png")
    paper = fake.files.add("paper.pdf", PDF, mimetype="application/pdf")
    clip = fake.files.add("audio_message.webm", b"webm" * 100, mimetype="audio/webm", subtype="slack_audio")
    song = fake.files.add("song.mp3", b"ID3" * 100, mimetype="audio/mpeg")
    drawing = fake.files.add("logo.svg", b"<svg/>", mimetype="image/svg+xml")
    iphone = fake.files.add("IMG_2.HEIC", b"heic" * 10, mimetype="image/heic")  # no vision model takes HEIC
    remote = fake.files.add("plan.gdoc", b"", mimetype="application/vnd.google-apps.document") | {"is_external": True}
    gone = {"id": "F0", "mode": "tombstone"}
    async with running(fake) as (_adapter, items):
        await fake.push_message("", files=[photo, paper, clip, song, drawing, iphone, remote, gone], subtype="file_share")
        item = await next_item(items)
    assert isinstance(item, Inbound) and item.text == ""
    got = [(a.kind, a.mime, a.size, a.name, a.handle) for a in item.attachments]
    assert got == [
        ("image", "image/png", len(PNG), "photo.png", photo["url_private"]),
        ("document", "application/pdf", len(PDF), "paper.pdf", paper["url_private"]),
        ("voice", "audio/webm", 400, "audio_message.webm", clip["url_private"]),
        ("audio", "audio/mpeg", 300, "song.mp3", song["url_private"]),
        ("document", "image/svg+xml", 6, "logo.svg", drawing["url_private"]),
        ("document", "image/heic", 40, "IMG_2.HEIC", iphone["url_private"]),
    ]
    assert not any(a.pending for a in item.attachments)
    assert fake.files.downloads == 0  # reporting an attachment fetches nothing


async def test_a_mention_with_a_file_keeps_text_and_attachment(fake: FakeSlack) -> None:
    photo = fake.files.add("IMG_1.JPG", PNG, mimetype="", filetype="jpg")
    async with running(fake) as (_adapter, items):
        await fake.push_event(mention_event("what is this?", files=[photo]))
        item = await next_item(items)
    assert isinstance(item, Inbound) and item.text == "what is this?"
    assert [(a.kind, a.mime) for a in item.attachments] == [("image", "image/jpeg")]  # guessed from the name


# -- Slack Connect stubs ------------------------------------------------------------------------


async def test_a_slack_connect_stub_is_pending_and_costs_no_call_until_described(fake: FakeSlack, tmp_path: Path) -> None:
    stub = fake.files.add_connect("photo.png", PNG, mimetype="image/png")
    denied = fake.files.add_connect("secret.pdf", PDF, mimetype="application/pdf", access="access_denied")
    assert set(stub) == {"id", "mode", "file_access", "created", "timestamp", "user"}  # no url, size or type
    async with running(fake) as (adapter, items):
        await fake.push_message("", files=[stub, denied], subtype="file_share")
        item = await next_item(items)
        assert isinstance(item, Inbound) and [(a.pending, a.size, a.name) for a in item.attachments] == [
            (True, None, None), (True, None, None)
        ]
        assert fake.calls("files.info") == [] and fake.files.downloads == 0  # reporting asks nothing
        first, second = item.attachments
        described = await adapter.describe(first)
        assert (described.kind, described.mime, described.size, described.name, described.pending) == (
            "image", "image/png", len(PNG), "photo.png", False
        )
        assert await download_to(adapter, described, tmp_path / "photo.png", max_bytes=10_000_000) == len(PNG)
        with pytest.raises(ChannelRefused, match="access_denied"):
            await adapter.describe(second)
    assert (tmp_path / "photo.png").read_bytes() == PNG
    assert [(c.args, c.token) for c in fake.calls("files.info")] == [({"file": stub["id"]}, fake.bot_token)]


async def test_a_pending_download_describes_the_file_first(fake: FakeSlack, tmp_path: Path) -> None:
    stub = fake.files.add_connect("paper.pdf", PDF, mimetype="application/pdf")
    pending = Attachment(kind="document", mime="application/octet-stream", handle=stub["id"], pending=True)
    async with make_adapter(fake) as adapter:
        assert await download_to(adapter, pending, tmp_path / "paper.pdf", max_bytes=10_000_000) == len(PDF)
    assert (tmp_path / "paper.pdf").read_bytes() == PDF and len(fake.calls("files.info")) == 1


async def test_files_info_refusals_and_failures(fake: FakeSlack) -> None:
    stub = fake.files.add_connect("photo.png", PNG, mimetype="image/png")
    pending = Attachment(kind="document", mime="application/octet-stream", handle=stub["id"], pending=True)
    unknown = Attachment(kind="document", mime="application/octet-stream", handle="F0NOTHERE", pending=True)
    async with make_adapter(fake) as adapter:
        with pytest.raises(ChannelRefused, match="file_not_found"):
            await adapter.describe(unknown)
        fake.files.missing_scope = True
        with pytest.raises(ChannelRefused, match="missing_scope.*files:read") as scoped:
            await adapter.describe(pending)
        assert not isinstance(scoped.value, ChannelAuthError)  # one file refused, not a dead channel
        fake.files.missing_scope = False
        fake.fail_next("files.info", status=500)
        with pytest.raises(ChannelError, match="files.info") as failed:
            await adapter.describe(pending)
        assert not isinstance(failed.value, ChannelRefused)
        assert (await adapter.describe(pending)).handle.endswith(f"/files-pri/T0001-{stub['id']}/photo.png")
    assert fake.files.downloads == 0


# -- downloads ----------------------------------------------------------------------------------


async def test_download_streams_the_file_with_the_bot_token(fake: FakeSlack, tmp_path: Path) -> None:
    adapter = make_adapter(fake)
    assert isinstance(adapter, FileAdapter) and adapter.max_file_bytes == 1024**3
    dest = tmp_path / "photo.png"
    async with adapter:
        size = await download_to(adapter, hosted(fake), dest, max_bytes=10_000_000)
    assert size == len(PNG) and dest.read_bytes() == PNG
    assert fake.files.downloads == 1 and fake.files.served[0].completed


@pytest.mark.parametrize("chunked", [False, True], ids=["declared-size", "undeclared-size"])
async def test_download_stops_at_the_cap_and_removes_the_file(fake: FakeSlack, tmp_path: Path, chunked: bool) -> None:
    fake.files.chunked = chunked
    big = b"x" * (16 * 1024 * 1024)  # far more than loopback socket buffers hold
    attachment = hosted(fake, big, "big.bin", "application/octet-stream")
    dest = tmp_path / "big.bin"
    async with make_adapter(fake) as adapter:
        with pytest.raises(AttachmentTooLarge) as caught:
            await download_to(adapter, attachment, dest, max_bytes=100_000)
    assert "100000" in caught.value.reason and not dest.exists()
    served = fake.files.served[-1]
    async with asyncio.timeout(10):
        await served.finished.wait()  # the fake's handler ends once it sees the connection closed
    assert not served.completed and served.sent < len(big)


async def test_a_wrong_token_is_refused_by_slack(fake: FakeSlack, tmp_path: Path) -> None:
    attachment = hosted(fake)
    async with make_adapter(fake, bot_token="xoxb-not-ours") as adapter:
        with pytest.raises(ChannelRefused, match="HTTP 401.*files:read"):
            await download_to(adapter, attachment, tmp_path / "p.png", max_bytes=10_000_000)
    assert fake.files.refused_downloads == [(401, "xoxb-not-ours")] and fake.files.downloads == 0
    assert not (tmp_path / "p.png").exists()


async def test_a_sign_in_page_instead_of_the_file_is_refused_naming_the_scope(fake: FakeSlack, tmp_path: Path) -> None:
    attachment = hosted(fake)
    fake.files.missing_scope = True
    async with make_adapter(fake) as adapter:
        with pytest.raises(ChannelRefused, match="sign-in page.*files:read"):
            await download_to(adapter, attachment, tmp_path / "p.png", max_bytes=10_000_000)
    assert fake.files.refused_downloads == [(200, fake.bot_token)] and not (tmp_path / "p.png").exists()


async def test_an_unknown_file_is_refused_and_a_server_error_may_be_retried(fake: FakeSlack, tmp_path: Path) -> None:
    attachment = hosted(fake)
    missing = Attachment(kind="image", mime="image/png", handle=attachment.handle.replace("-F", "-FX"))
    async with make_adapter(fake) as adapter:
        with pytest.raises(ChannelRefused, match="HTTP 404"):
            await download_to(adapter, missing, tmp_path / "a", max_bytes=10_000_000)
        fake.files.fail_next_download(status=503)
        with pytest.raises(ChannelError, match="HTTP 503") as caught:
            await download_to(adapter, attachment, tmp_path / "b", max_bytes=10_000_000)
        assert not isinstance(caught.value, ChannelRefused)
        assert await download_to(adapter, attachment, tmp_path / "c", max_bytes=10_000_000) == len(PNG)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


async def test_the_token_never_goes_to_a_host_that_is_not_slack(fake: FakeSlack, tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=b"stolen?")

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    async with serving(app) as origin, make_adapter(fake) as adapter:
        for handle in (f"{origin}/files-pri/T0001-F1/x.png", "https://files.slack.com.evil.example/x.png", "x.png"):
            with pytest.raises(ChannelRefused, match="not a Slack file URL"):
                await download_to(adapter, 
                    Attachment(kind="image", mime="image/png", handle=handle), tmp_path / "x", max_bytes=1000
                )
    assert seen == [] and not (tmp_path / "x").exists()


async def test_a_redirect_is_refused_and_the_token_does_not_follow_it(fake: FakeSlack, tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=PNG)

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    attachment = hosted(fake)
    async with serving(app) as origin, make_adapter(fake) as adapter:
        fake.files.redirect_next_download(f"{origin}/signin?redir=photo.png")
        with pytest.raises(ChannelRefused, match="HTTP 302.*redirected.*files:read"):
            await download_to(adapter, attachment, tmp_path / "p.png", max_bytes=10_000_000)
        fake.files.fail_next_download(status=403)
        with pytest.raises(ChannelRefused, match="HTTP 403.*files:read"):
            await download_to(adapter, attachment, tmp_path / "p.png", max_bytes=10_000_000)
    assert seen == [] and not (tmp_path / "p.png").exists()


async def test_a_stalled_download_is_a_channel_error(fake: FakeSlack, tmp_path: Path) -> None:
    attachment = hosted(fake)
    fake.files.stall_next_download(30.0)
    async with make_adapter(fake) as adapter:
        adapter.download_idle_timeout_s = 0.3
        with pytest.raises(ChannelError, match="stalled") as caught:
            await download_to(adapter, attachment, tmp_path / "p.png", max_bytes=10_000_000)
    assert not isinstance(caught.value, ChannelRefused) and not (tmp_path / "p.png").exists()


# -- uploads ------------------------------------------------------------------------------------


async def test_send_file_posts_an_image_and_a_document_through_the_v2_flow(fake: FakeSlack, tmp_path: Path, outbound: Outbound) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    image = outbound(chat="D0001", path=tmp_path / "chart.png", name="chart.png", mime="image/png", caption="<!channel> look")
    document = outbound(
        chat="C0001", path=tmp_path / "report.pdf", name="report.pdf", mime="application/pdf", thread="171.5"
    )
    async with make_adapter(fake) as adapter:
        first = await adapter.send_file(image)
        second = await adapter.send_file(document)
    assert [u.file_id for u in fake.files.uploads] == [first, second]
    shown = [(u.filename, u.content, u.channel, u.thread_ts, u.initial_comment) for u in fake.files.uploads]
    assert shown == [
        ("chart.png", PNG, "D0001", None, "&lt;!channel&gt; look"),  # the caption cannot ping the channel
        ("report.pdf", PDF, "C0001", "171.5", None),
    ]
    lengths = [call.args["length"] for call in fake.calls("files.getUploadURLExternal")]
    assert lengths == [str(len(PNG)), str(len(PDF))]
    assert all(call.token == fake.bot_token for call in fake.calls("files.completeUploadExternal"))


async def test_send_file_failures_are_refusals_or_retryable(fake: FakeSlack, tmp_path: Path, outbound: Outbound) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"hello")
    file = outbound(chat="D0001", path=path, name="a.txt", mime="text/plain")
    async with make_adapter(fake) as adapter:
        fake.fail_next("files.completeUploadExternal", error="not_in_channel")
        with pytest.raises(ChannelRefused, match="not_in_channel"):
            await adapter.send_file(file)
        fake.files.fail_next_upload(status=500)
        with pytest.raises(ChannelError, match="HTTP 500") as caught:
            await adapter.send_file(file)
        assert not isinstance(caught.value, ChannelRefused)
        with pytest.raises(ChannelRefused, match="channel_not_found"):
            await adapter.send_file(outbound(chat="nowhere", path=path, name="a.txt", mime="text/plain"))
        (tmp_path / "empty").write_bytes(b"")
        with pytest.raises(ChannelRefused, match="empty"):
            await adapter.send_file(outbound(chat="D0001", path=tmp_path / "empty", name="e", mime="text/plain"))
        assert await adapter.send_file(file)
    assert len(fake.files.uploads) == 1 and fake.files.uploads[0].content == b"hello"
