"""The provider contract, once per kind: each client against its own loopback fake API.

A `Backend` scripts its fake in the kind's own wire format, so every test below states
one behaviour both kinds must share (text, tool calls through the real engine, streaming,
error classification, no key in any error).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import orchestrator
from orchestrator.engine import StopReason
from orchestrator.errors import ProviderError, ProviderUnavailable
from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.base import Completion, ToolCall
from orchestrator.providers.openai_compat import OpenAICompatProvider
from tests.fakes import anthropic_api, openai_server
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.providers.kit import FAST, Pieces

KEY = "sk-contract-0123456789abcdef"
KEY_ENV = "ORCHESTRATOR_CONTRACT_TEST_KEY"
USER = ({"role": "user", "content": "hi"},)


@dataclass(slots=True)
class Backend:
    """One provider kind with its fake: script replies and build clients in that kind's terms."""

    kind: str
    fake: FakeOpenAI | FakeAnthropic

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.fake.requests

    def text(self, content: str) -> Any:
        return openai_server.text(content) if self.kind == "openai" else anthropic_api.text(content)

    def tool_call(self, name: str, arguments: Mapping[str, Any], *, id: str) -> Any:
        if self.kind == "openai":
            return openai_server.tool_call(name, arguments, id=id)
        return anthropic_api.tool_use(name, arguments, id=id)

    def status(self, code: int) -> Any:
        if self.kind == "openai":
            return openai_server.status(code, retry_after=FAST)
        return anthropic_api.error(code, retry_after=FAST)

    def provider(
        self, base_url: str | None = None, *, max_retries: int = 0, timeout_s: float = 5.0
    ) -> OpenAICompatProvider | AnthropicProvider:
        cls = OpenAICompatProvider if self.kind == "openai" else AnthropicProvider
        return cls(
            name="p", base_url=base_url or self.base_url, api_key=KEY, timeout_s=timeout_s, max_retries=max_retries
        )

    def last_tool_result(self, request: Mapping[str, Any]) -> tuple[str, str]:
        """Return (call id, content) of the tool result at the end of a request."""
        if self.kind == "openai":
            last = request["messages"][-1]
            return last["tool_call_id"], last["content"]
        [block] = [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]
        return block["tool_use_id"], block["content"]


@pytest.fixture(params=["openai", "anthropic"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    # Strict: a request nobody scripted fails loudly instead of getting a default answer.
    fake: FakeOpenAI | FakeAnthropic = FakeOpenAI(default=None) if request.param == "openai" else FakeAnthropic(default=None)
    async with fake:
        yield Backend(request.param, fake)


def _config(tmp_path: Path, backend: Backend) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("x", encoding="utf-8")
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[providers.fake]
kind = "{backend.kind}"
base_url = "{backend.base_url}"
api_key_env = "{KEY_ENV}"
max_retries = 0

[agents.ops]
provider = "fake"
model = "contract-model"
system_prompt = "You are ops."
workspace = "{tmp_path / 'work'}"
tools = ["list_dir"]

[agents.ops.approval]
auto_approve = ["list_dir"]
""",
        encoding="utf-8",
    )
    return path


async def test_text_answer(backend: Backend) -> None:
    backend.fake.script(backend.text("hello"))
    async with backend.provider() as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion == Completion(text="hello")


async def test_tool_call_answer(backend: Backend) -> None:
    backend.fake.script(backend.tool_call("search", {"q": "cats"}, id="call_a"))
    async with backend.provider() as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion == Completion(text=None, tool_calls=(ToolCall(id="call_a", name="search", arguments='{"q": "cats"}'),))


async def test_tool_call_round_trip_through_the_engine(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend.fake.script(backend.tool_call("list_dir", {"path": "."}, id="call_ls"), backend.text("one file"))
    async with orchestrator.Agent.from_config(_config(tmp_path, backend), "ops") as agent:
        result = await agent.run("what is there?")
        again = backend.text("still one file")
        backend.fake.script(again)
        second = await agent.run("and now?")
    assert (result.text, result.stop, result.executed) == ("one file", StopReason.COMPLETED, ("list_dir",))
    assert second.text == "still one file"
    first, answer, follow_up = backend.requests
    assert [spec.get("name") or spec["function"]["name"] for spec in first["tools"]] == ["list_dir"]
    call_id, content = backend.last_tool_result(answer)
    assert call_id == "call_ls" and "notes.txt" in content
    assert len(follow_up["messages"]) > len(answer["messages"])  # the history went along
    if isinstance(backend.fake, FakeAnthropic):
        assert backend.fake.rejected == []  # the real API's ordering rules held on every request
        assert backend.fake.keys == [KEY] * 3


async def test_streamed_deltas_add_up_to_the_same_completion(backend: Backend) -> None:
    backend.fake.script(backend.text("the quick brown fox"), backend.text("the quick brown fox"))
    sink = Pieces()
    async with backend.provider() as provider:
        plain = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        streamed = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert "".join(sink.pieces) == "the quick brown fox" and all(sink.pieces)  # pieces may hold several tokens
    assert streamed == plain == Completion(text="the quick brown fox")
    assert [sent.get("stream") for sent in backend.requests] == [None, True]


async def test_a_plain_json_answer_to_a_streamed_request_is_the_whole_answer(backend: Backend) -> None:
    backend.fake.ignore_stream = True  # a server (a proxy) that answers `stream: true` with one JSON body
    call = backend.tool_call("list_dir", {"path": "."}, id="call_ls")
    backend.fake.script(backend.text("the whole answer"), call, backend.text("the whole answer"), call)
    sink, silent = Pieces(), Pieces()
    async with backend.provider() as provider:
        streamed = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
        streamed_call = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=silent)
        plain = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        plain_call = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert streamed == plain and streamed.text == "the whole answer"
    assert sink.pieces == ["the whole answer"]  # shown at once, in one piece
    assert streamed_call == plain_call and [c.name for c in streamed_call.tool_calls] == ["list_dir"]
    assert silent.pieces == []
    assert [sent.get("stream") for sent in backend.requests] == [True, True, None, None]


@pytest.mark.parametrize("streamed", [False, True])
async def test_rate_limit_after_the_sdk_retries_is_unavailable_with_its_status(backend: Backend, streamed: bool) -> None:
    backend.fake.script(*[backend.status(429)] * 3)
    async with backend.provider(max_retries=2) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(
                model="m", messages=USER, tools=(), temperature=None, on_text=Pieces() if streamed else None
            )
    assert caught.value.status == 429
    assert caught.value.error_type is not None and "rate_limit" in caught.value.error_type
    assert len(backend.requests) == 3


async def test_rate_limit_then_success_is_retried(backend: Backend) -> None:
    backend.fake.script(backend.status(429), backend.text("after the wait"))
    async with backend.provider(max_retries=2) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion.text == "after the wait"


async def test_refused_key_is_a_provider_error_that_never_shows_the_key(backend: Backend) -> None:
    backend.fake.refuse_key = True  # the fake quotes the key back, as an echoing proxy does
    async with backend.provider(max_retries=2) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert caught.value.status == 401
    assert KEY not in str(caught.value) and KEY not in caught.value.reason
    assert len(backend.requests) == 1  # never retried


async def test_the_engine_reports_a_refused_key_without_the_key(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend.fake.refuse_key = True
    async with orchestrator.Agent.from_config(_config(tmp_path, backend), "ops") as agent:
        result = await agent.run("hi")
    assert result.stop is StopReason.PROVIDER_ERROR
    assert result.error is not None and "401" in result.error
    assert KEY not in result.text and KEY not in result.error


@pytest.mark.parametrize("streamed", [False, True])
async def test_connection_refused_is_unavailable(backend: Backend, streamed: bool) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with backend.provider(url) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(
                model="m", messages=USER, tools=(), temperature=None, on_text=Pieces() if streamed else None
            )
    assert caught.value.status is None
    assert url in str(caught.value)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_refused_connection_says_so_at_once_without_retrying(
    backend: Backend, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    caplog.set_level(logging.DEBUG)
    async with backend.provider(f"http://127.0.0.1:{port}", max_retries=3) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(
                model="m", messages=USER, tools=(), temperature=None, on_text=Pieces() if streamed else None
            )
    assert caught.value.reason == f"connection refused by 127.0.0.1:{port}"
    assert not caught.value.timed_out
    # nothing listens, and a retry cannot change that within the SDK's backoff: one attempt
    assert [r.getMessage() for r in caplog.records if "Retrying request" in r.getMessage()] == []


async def test_slow_answer_is_unavailable(backend: Backend) -> None:
    backend.fake.latency_s = 1.0
    async with backend.provider(timeout_s=0.05) as provider:
        with pytest.raises(ProviderUnavailable, match="no answer within 0.05 s"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)


@pytest.mark.parametrize("streamed", [False, True])
async def test_unpaired_surrogates_from_the_model_become_replacement_characters(backend: Backend, streamed: bool) -> None:
    # JSON may carry a lone "\ud800" escape; Python decodes it to a str no UTF-8 writer takes.
    backend.fake.script(
        backend.text("a\ud800 b \udfff c \U0001f600"), backend.tool_call("search", {"q": "x\udc00"}, id="call_s")
    )
    sink = Pieces()
    on_text = sink if streamed else None
    async with backend.provider() as provider:
        answer = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=on_text)
        call = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=on_text)
    assert answer.text == "a\ufffd b \ufffd c \U0001f600"
    [tool] = call.tool_calls
    assert json.loads(tool.arguments) == {"q": "x\ufffd"}
    if streamed:
        assert "".join(sink.pieces) == answer.text + (call.text or "")
    for piece in (answer.text, tool.arguments, *sink.pieces):
        piece.encode("utf-8")  # every writer and sender after the provider can take it
