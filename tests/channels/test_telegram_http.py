"""PTB's HTTP layer on aiohttp (`channels.telegram_http.AiohttpRequest`) through a real `telegram.Bot`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from aiohttp import web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut

from channels import ChannelError, Outbound
from channels.telegram import TelegramAdapter
from channels.telegram_http import AiohttpRequest
from orchestrator.config.channels import TelegramChannelConfig
from tests.fakes.loopback import serving

TOKEN = "123456:TEST-token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def serve(handler: Handler) -> AbstractAsyncContextManager[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return serving(app)


def request(**overrides: Any) -> AiohttpRequest:
    settings: dict[str, Any] = {
        "connection_pool_size": 4, "read_timeout": 5.0, "write_timeout": 5.0, "connect_timeout": 5.0, "pool_timeout": 5.0,
    }
    return AiohttpRequest(**(settings | overrides))


async def failed_post(url: str, expected: type[Exception], **overrides: Any) -> Exception:
    """POST getMe under `url` through a fresh AiohttpRequest; return the `expected` error it raised."""
    http = request(**overrides)
    try:
        with pytest.raises(expected) as caught:
            await http.post(f"{url}/bot{TOKEN}/getMe")
    finally:
        await http.shutdown()
    return caught.value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_form_parameters_and_the_answer_round_trip() -> None:
    seen: list[dict[str, str]] = []

    async def handler(req: web.Request) -> web.Response:
        seen.append({"path": req.path, "agent": req.headers["User-Agent"], **dict(await req.post())})
        return web.json_response({"ok": True, "result": True})

    async with serve(handler) as url:
        http = request()
        bot = Bot(TOKEN, base_url=f"{url}/bot", request=http, get_updates_request=request())
        try:
            assert await bot.send_chat_action(chat_id=42, action="typing") is True
        finally:
            await http.shutdown()
    (call,) = seen
    assert call["path"] == f"/bot{TOKEN}/sendChatAction"
    assert call["chat_id"] == "42" and call["action"] == "typing"
    assert call["agent"] == AiohttpRequest.USER_AGENT


async def test_a_file_upload_is_sent_as_multipart() -> None:
    seen: dict[str, Any] = {}

    async def handler(req: web.Request) -> web.Response:
        form = await req.post()
        upload = form["document"]
        assert isinstance(upload, web.FileField)
        seen.update(chat=form["chat_id"], name=upload.filename, body=upload.file.read())
        message = {"message_id": 1, "date": 0, "chat": {"id": 42, "type": "private"}}
        return web.json_response({"ok": True, "result": message})

    async with serve(handler) as url:
        http = request()
        bot = Bot(TOKEN, base_url=f"{url}/bot", request=http, get_updates_request=request())
        try:
            await bot.send_document(chat_id=42, document=InputFile(b"report body", filename="report.txt"))
        finally:
            await http.shutdown()
    assert seen == {"chat": "42", "name": "report.txt", "body": b"report body"}


async def test_a_slow_answer_is_timed_out() -> None:
    async def handler(req: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({"ok": True, "result": True})

    async with serve(handler) as url:
        await failed_post(url, TimedOut, read_timeout=0.2)


async def test_nothing_listening_is_a_network_error_and_a_channel_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    await failed_post(url, NetworkError)
    config = TelegramChannelConfig.model_validate({"kind": "telegram", "token": "env:TG", "api_base_url": url})
    adapter = TelegramAdapter(name="tg", config=config, token=TOKEN, webhook_secret=None)
    try:
        with pytest.raises(ChannelError, match="sendMessage"):
            await adapter.send(Outbound(chat="42", thread=None, text="hello"))
    finally:
        await adapter.aclose()


async def test_connections_are_capped_at_the_pool_size() -> None:
    active = peak = 0
    order: list[str] = []

    async def handler(req: web.Request) -> web.Response:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        order.append(str((await req.post())["chat_id"]))
        await asyncio.sleep(0.02)
        active -= 1
        return web.json_response({"ok": True, "result": True})

    async with serve(handler) as url:
        http = request(connection_pool_size=2)
        bot = Bot(TOKEN, base_url=f"{url}/bot", request=http, get_updates_request=request())
        try:
            await asyncio.gather(*(bot.send_chat_action(chat_id=i, action="typing") for i in range(10)))
        finally:
            await http.shutdown()
    assert peak == 2
    assert sorted(order, key=int) == [str(i) for i in range(10)]  # every waiter was served


async def test_errors_never_quote_the_bot_token() -> None:
    for base in ("http://127.0.0.1:99999", "ftp://127.0.0.1"):  # aiohttp quotes these URLs whole
        error = await failed_post(base, NetworkError)
        assert TOKEN not in str(error) and "/bot<token>/getMe" in str(error)
        assert error.__cause__ is None and error.__suppress_context__


async def test_a_redirect_is_not_followed() -> None:
    followed: list[str] = []

    async def handler(req: web.Request) -> web.StreamResponse:
        if req.path.startswith("/elsewhere"):
            followed.append(req.path)
            return web.json_response({"ok": True, "result": True})
        raise web.HTTPFound("/elsewhere")

    async with serve(handler) as url:
        await failed_post(url, NetworkError)
    assert followed == []  # as with PTB's own httpx client: the token never goes anywhere else
