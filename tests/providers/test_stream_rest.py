"""The streamed read rests with the socket paused, and leaves it reading for the next request."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from orchestrator.providers import _transport
from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.openai_compat import OpenAICompatProvider
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, paced, text
from tests.providers.kit import Pieces

pytestmark = pytest.mark.slow

ANSWER = "one two three four five six seven eight nine ten " * 4


class Sockets:
    """Keep each transport the streamed read found under the SDK's response (the real lookup)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.found: list[asyncio.ReadTransport | None] = []
        self.paused_seen = False
        lookup, rest = _transport._socket_of, _transport._rest

        def spy_lookup(response: object) -> asyncio.ReadTransport | None:
            socket = lookup(response)
            self.found.append(socket)
            return socket

        async def spy_rest(socket: asyncio.ReadTransport | None) -> None:
            task = asyncio.ensure_future(rest(socket))
            await asyncio.sleep(0)  # the rest has paused the socket by now
            if socket is not None and not socket.is_reading():
                self.paused_seen = True
            await task

        monkeypatch.setattr(_transport, "_socket_of", spy_lookup)
        monkeypatch.setattr(_transport, "_rest", spy_rest)


async def test_an_openai_stream_rests_paused_and_the_connection_reads_again_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sockets = Sockets(monkeypatch)
    async with FakeOpenAI(default=None) as llm:
        provider = OpenAICompatProvider(name="f", base_url=llm.base_url, api_key="k", timeout_s=10, max_retries=0)
        async with provider:
            for _ in range(2):  # the second request reuses the keep-alive connection the first paused
                llm.script(paced(text(ANSWER), over_s=0.4))
                pieces = Pieces()
                done = await provider.complete(model="m", messages=[{"role": "user", "content": "hi"}], tools=[],
                                               temperature=None, on_text=pieces)
                assert done.text == ANSWER and "".join(pieces.pieces) == ANSWER
    assert len(sockets.found) == 2 and all(isinstance(s, asyncio.ReadTransport) for s in sockets.found)
    assert sockets.paused_seen


async def test_an_anthropic_stream_rests_paused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    sockets = Sockets(monkeypatch)
    async with FakeAnthropic(default=None, api_key="k") as claude:
        provider = AnthropicProvider(name="c", base_url=claude.base_url, api_key="k", timeout_s=10, max_retries=0)
        async with provider:
            for _ in range(2):
                claude.script(replace(anthropic_api.text(ANSWER), gap_s=0.01))
                pieces = Pieces()
                done = await provider.complete(model="m", messages=[{"role": "user", "content": "hi"}], tools=[],
                                               temperature=None, on_text=pieces)
                assert done.text == ANSWER and "".join(pieces.pieces) == ANSWER
    assert len(sockets.found) == 2 and all(isinstance(s, asyncio.ReadTransport) for s in sockets.found)
    assert sockets.paused_seen
