"""OpenAICompatProvider against a loopback fake OpenAI server."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.providers.base import Completion, ToolCall
from orchestrator.providers.openai_compat import OpenAICompatProvider
from orchestrator.errors import ProviderError, ProviderUnavailable
from tests.fakes.openai_server import FakeOpenAI, Reply, cut_off, status, text, tool_call, tool_calls

USER = ({"role": "user", "content": "hi"},)
# The SDK ignores a Retry-After of 0 and backs off 0.5 s or more; 1 ms keeps retries fast.
FAST = 0.001


class Pieces:
    """An `on_text` sink that keeps every piece it is given."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, text: str) -> None:
        self.pieces.append(text)


def _provider(base_url: str, *, max_retries: int = 0, timeout_s: float = 5.0) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        name="local", base_url=base_url, api_key=None, timeout_s=timeout_s, max_retries=max_retries
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    # Strict: a request nobody scripted fails loudly instead of getting a default answer.
    async with FakeOpenAI(default=None) as server:
        yield server


async def test_text_reply(fake: FakeOpenAI) -> None:
    fake.script(text("hello"))
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion == Completion(text="hello")


async def test_tool_call_reply_is_parsed(fake: FakeOpenAI) -> None:
    fake.script(
        tool_call("search", {"q": "cats"}, id="call_a"),
        tool_calls(("read", {"path": "a.txt"}), ("write", '{"path": "b.txt"}'), content="two things"),
    )
    async with _provider(fake.base_url) as provider:
        one = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        two = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    expected = ToolCall(id="call_a", name="search", arguments='{"q": "cats"}')
    assert one == Completion(text=None, tool_calls=(expected,))
    assert two.text == "two things"
    assert [(call.name, call.arguments) for call in two.tool_calls] == [
        ("read", '{"path": "a.txt"}'),
        ("write", '{"path": "b.txt"}'),
    ]
    assert two.tool_calls[0].id != two.tool_calls[1].id


async def test_model_messages_tools_and_temperature_are_sent_as_given(fake: FakeOpenAI) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the web.",
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
            },
        }
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find cats"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "no cats"},
    ]
    fake.script(text("ok"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="qwen-7b", messages=messages, tools=tools, temperature=0.25)
    [sent] = fake.requests
    assert sent == {"model": "qwen-7b", "messages": messages, "tools": tools, "temperature": 0.25, "max_tokens": 4096}


async def test_api_key_is_sent_as_bearer_token(fake: FakeOpenAI) -> None:
    fake.script(text("ok"), text("ok"))
    async with OpenAICompatProvider(
        name="p", base_url=fake.base_url, api_key="sk-test-1", timeout_s=5, max_retries=0
    ) as provider:
        await provider.complete(model="m", messages=[{"role": "user", "content": "hi"}], tools=[], temperature=None)
    async with _provider(fake.base_url) as keyless:
        await keyless.complete(model="m", messages=[{"role": "user", "content": "hi"}], tools=[], temperature=None)
    assert fake.authorizations == ["Bearer sk-test-1", "Bearer not-needed"]


async def test_empty_tools_and_unset_temperature_are_left_out(fake: FakeOpenAI) -> None:
    fake.script(text("ok"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    [sent] = fake.requests
    assert set(sent) == {"model", "messages", "max_tokens"}  # max_tokens always: no answer passes its budget


async def test_stream_is_never_requested(fake: FakeOpenAI) -> None:
    tools = ({"type": "function", "function": {"name": "t"}},)
    fake.script(text("ok"), tool_call("t", {}))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        await provider.complete(model="m", messages=USER, tools=tools, temperature=0.0)
    assert [("stream" in sent) for sent in fake.requests] == [False, False]


async def test_rate_limit_then_success_is_retried(fake: FakeOpenAI) -> None:
    fake.script(status(429, retry_after=FAST), text("after the wait"))
    async with _provider(fake.base_url, max_retries=2) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion.text == "after the wait"
    assert len(fake.requests) == 2
    assert fake.pending == 0


async def test_server_error_after_exhausted_retries_raises_provider_error(fake: FakeOpenAI) -> None:
    fake.script(*[status(500, retry_after=FAST, message="model crashed")] * 3)
    async with _provider(fake.base_url, max_retries=2) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert caught.value.provider == "local"
    assert caught.value.url == fake.base_url
    assert caught.value.reason == "HTTP 500: model crashed"
    assert len(fake.requests) == 3


async def test_client_error_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script(status(400, message="unknown model 'nope'"))
    async with _provider(fake.base_url, max_retries=2) as provider:
        with pytest.raises(ProviderError, match="HTTP 400: unknown model 'nope'"):
            await provider.complete(model="nope", messages=USER, tools=(), temperature=None)
    assert len(fake.requests) == 1


async def test_completion_without_choices_raises_provider_error(fake: FakeOpenAI) -> None:
    fake.script(Reply(body=b'"choices":[]}'))
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError, match="malformed completion: the response has no choices"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)


async def test_dynamic_reply_sees_the_request(fake: FakeOpenAI) -> None:
    def echo(request: dict[str, Any]) -> Reply:
        return text(f"{request['model']}: {request['messages'][-1]['content']}")

    fake.script(echo)
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion.text == "m: hi"


@pytest.mark.parametrize("streamed", [False, True])
async def test_unreachable_port_raises_provider_unavailable(streamed: bool) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with _provider(url) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(
                model="m", messages=USER, tools=(), temperature=None, on_text=Pieces() if streamed else None
            )
    assert caught.value.url == url
    assert url in str(caught.value)


async def test_slow_answer_raises_provider_unavailable() -> None:
    async with FakeOpenAI(latency_s=1.0) as slow, _provider(slow.base_url, timeout_s=0.05) as provider:
        with pytest.raises(ProviderUnavailable, match="no answer within 0.05 s"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)


async def test_aclose_twice_is_harmless(fake: FakeOpenAI) -> None:
    fake.script(text("hi"))
    provider = _provider(fake.base_url)
    assert (await provider.complete(model="m", messages=USER, tools=(), temperature=None)).text == "hi"
    await provider.aclose()
    await provider.aclose()
    # closed for good: a later call never reaches the server
    with pytest.raises(RuntimeError, match="client has been closed"):
        await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert len(fake.requests) == 1


async def test_streamed_text_arrives_in_order_and_adds_up_to_the_completion(fake: FakeOpenAI) -> None:
    fake.script(text("the quick brown fox"), text("the quick brown fox"))
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        plain = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        streamed = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert "".join(sink.pieces) == "the quick brown fox" and all(sink.pieces)  # pieces may hold several tokens
    assert streamed == plain == Completion(text="the quick brown fox")
    unstreamed_body, streamed_body = fake.requests
    assert "stream" not in unstreamed_body
    assert streamed_body == {
        "model": "m", "messages": list(USER), "stream": True, "stream_options": {"include_usage": True},
        "max_tokens": 4096,
    }
    assert streamed.usage == plain.usage is not None  # the last chunk's usage, as the unstreamed answer's


async def test_streamed_tool_calls_assemble_like_the_unstreamed_answer(fake: FakeOpenAI) -> None:
    long_arguments = {"path": "notes/a-rather-long-file-name.txt", "lines": [1, 2, 3]}
    both = tool_calls(("read", long_arguments), ("write", '{"path": "b.txt", "text": "hello"}'), content="two things")
    alone = tool_call("search", {"q": "cats and dogs"}, id="call_s")
    fake.script(both, both, alone, alone)
    with_text, without_text = Pieces(), Pieces()
    async with _provider(fake.base_url) as provider:
        plain_both = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        streamed_both = await provider.complete(
            model="m", messages=USER, tools=(), temperature=None, on_text=with_text
        )
        plain_alone = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
        streamed_alone = await provider.complete(
            model="m", messages=USER, tools=(), temperature=None, on_text=without_text
        )
    assert streamed_both == plain_both
    assert [(c.name, c.arguments) for c in streamed_both.tool_calls] == [
        ("read", '{"path": "notes/a-rather-long-file-name.txt", "lines": [1, 2, 3]}'),
        ("write", '{"path": "b.txt", "text": "hello"}'),
    ]
    assert "".join(with_text.pieces) == "two things" and all(with_text.pieces)
    expected = ToolCall(id="call_s", name="search", arguments='{"q": "cats and dogs"}')
    assert streamed_alone == plain_alone == Completion(text=None, tool_calls=(expected,))
    assert without_text.pieces == []  # no content at all: on_text is never called
    assert [sent.get("stream") for sent in fake.requests] == [None, True, None, True]


async def test_streamed_server_error_raises_the_same_provider_error(fake: FakeOpenAI) -> None:
    fake.script(*[status(500, retry_after=FAST, message="model crashed")] * 3)
    sink = Pieces()
    async with _provider(fake.base_url, max_retries=2) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert caught.value.reason == "HTTP 500: model crashed"
    assert len(fake.requests) == 3  # retried like an unstreamed request
    assert sink.pieces == []


async def test_stream_cut_off_mid_answer_raises_provider_unavailable_after_the_pieces_so_far(
    fake: FakeOpenAI,
) -> None:
    fake.script(cut_off(text("one two three four"), after=3))  # the role, "one", " two"
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderUnavailable, match="the stream broke off: Response payload is not completed"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    # a piece may hold several tokens (one per network read), never text after the break
    assert "".join(sink.pieces) == "one two" and all(sink.pieces)


async def test_streamed_completion_without_choices_raises_provider_error(fake: FakeOpenAI) -> None:
    fake.script(Reply(body=b'"choices":[]}'))
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError, match="malformed completion: the response has no choices"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=Pieces())


async def test_what_on_text_raises_propagates_unchanged(fake: FakeOpenAI) -> None:
    fake.script(text("never finished"), text("the connection is still usable"))

    async def refuse(piece: str) -> None:
        raise LookupError(f"sink refused {piece!r}")

    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        with pytest.raises(LookupError, match="sink refused 'never"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=refuse)
        after = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert after.text == "the connection is still usable"
    assert "".join(sink.pieces) == after.text


def _chunk(content: str, *, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}
    return b'{"id":"c1","object":"chat.completion.chunk","choices":[' + json.dumps(choice).encode() + b"]}"


async def test_events_split_across_reads_with_crlf_comments_and_fields_assemble_the_same_text(fake: FakeOpenAI) -> None:
    first = _chunk("one")
    cut = first.index(b"[") + 1  # one event's data on two lines, the CRLF between them split by the network
    stream = (
        b": keep-alive comment\r\n\r\nid: 1\r\nretry: 100\r\ndata: " + first[:cut] + b"\r",
        b"\ndata: " + first[cut:] + b"\r\n\r\ndata: " + _chunk(" two")[:20],  # an event cut mid-JSON
        _chunk(" two")[20:] + b"\n\ndata:" + _chunk(" three", finish="stop") + b"\n\ndata: [DONE]\n\n",
    )
    fake.script(Reply(body=b"", raw_stream=stream))
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert completion.text == "one two three"
    assert "".join(sink.pieces) == "one two three" and all(sink.pieces)


async def test_a_streamed_event_that_is_not_json_raises_provider_error(fake: FakeOpenAI) -> None:
    fake.script(Reply(body=b"", raw_stream=(b"data: " + _chunk("fine") + b"\n\ndata: {not json\n\n",)))
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError, match="malformed completion: an event whose data is not JSON"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert sink.pieces == []  # the read that held the bad event handed on nothing


async def test_an_event_that_only_looks_like_json_among_good_ones_is_the_one_refused(fake: FakeOpenAI) -> None:
    # one read: a good object, a braced non-JSON one and `[DONE]` (the batch parse fails, each is parsed alone)
    read = b"data: " + _chunk("fine") + b'\n\ndata: {"content": oops}\n\ndata: [DONE]\n\n'
    fake.script(Reply(body=b"", raw_stream=(read,)))
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError, match=r"not JSON: b'\{\"content\": oops\}'"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    assert sink.pieces == []


async def test_an_error_event_mid_stream_raises_provider_error_with_its_message(fake: FakeOpenAI) -> None:
    error = b'{"error":{"message":"the model fell over","type":"server_error"}}'
    fake.script(Reply(body=b"", raw_stream=(b"data: " + _chunk("partial") + b"\n\n", b"data: " + error + b"\n\n")))
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError, match="the model fell over"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=Pieces())


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_answer_keeps_the_servers_id_model_and_finish_reason(fake: FakeOpenAI, streamed: bool) -> None:
    fake.served_model = "m-2026-01-01"
    fake.script(text("hello"), tool_call("search", {"q": "cats"}))
    on_text = Pieces() if streamed else None
    async with _provider(fake.base_url) as provider:
        said = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=on_text)
        called = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=on_text)
    assert [(c.response_id, c.response_model, c.finish_reason) for c in (said, called)] == [
        ("chatcmpl-fake-1", "m-2026-01-01", "stop"), ("chatcmpl-fake-2", "m-2026-01-01", "tool_calls"),
    ]
