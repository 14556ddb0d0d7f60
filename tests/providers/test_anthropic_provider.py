"""AnthropicProvider against the loopback Messages API fake: mapping, caching, streaming, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.errors import ProviderError, ProviderUnavailable
from orchestrator.providers.anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider
from orchestrator.providers.base import Completion, ToolCall
from tests.fakes.anthropic_api import FakeAnthropic, Reply, cut_off, error, stream_error, text, tool_use
from tests.providers.kit import FAST, Pieces

KEY = "sk-ant-test-0123456789"
USER = ({"role": "user", "content": "hi"},)
SEARCH_SPEC = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}
READ_SPEC = {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}


def _provider(base_url: str, *, max_retries: int = 0, timeout_s: float = 5.0) -> AnthropicProvider:
    return AnthropicProvider(name="claude", base_url=base_url, api_key=KEY, timeout_s=timeout_s, max_retries=max_retries)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(default=None, api_key=KEY) as server:
        yield server


async def test_request_maps_system_tools_and_history_to_the_messages_api(fake: FakeAnthropic) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find cats"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "cats"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "no cats"},
    ]
    fake.script(text("none found"))
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="claude-x", messages=messages, tools=[SEARCH_SPEC], temperature=0.25)
    assert completion == Completion(text="none found")
    [sent] = fake.requests
    assert sent == {
        "model": "claude-x",
        "max_tokens": DEFAULT_MAX_TOKENS,  # and no temperature: API 2026-10-21 refuses it
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {
                "name": "search",
                "description": "Search the web.",
                "input_schema": SEARCH_SPEC["function"]["parameters"],  # type: ignore[index]
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "find cats"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "cats"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "no cats"}]},
        ],
    }
    assert fake.keys == [KEY]
    assert fake.headers[0]["anthropic-version"]


async def test_cache_breakpoint_sits_on_the_last_tool_spec_only(fake: FakeAnthropic) -> None:
    fake.script(text("ok"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=USER, tools=[SEARCH_SPEC, READ_SPEC], temperature=None)
    [sent] = fake.requests
    assert [("cache_control" in tool) for tool in sent["tools"]] == [False, True]
    assert "system" not in sent  # no system prompt: no block, no breakpoint


async def test_second_turn_reads_the_system_prompt_and_tools_from_the_cache(fake: FakeAnthropic) -> None:
    system = {"role": "system", "content": "You are ops. " * 200}
    first = [system, {"role": "user", "content": "one"}]
    second = [*first, {"role": "assistant", "content": "done one"}, {"role": "user", "content": "two"}]
    fake.script(text("done one"), text("done two"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=first, tools=[SEARCH_SPEC], temperature=None)
        await provider.complete(model="m", messages=second, tools=[SEARCH_SPEC], temperature=None)
    cold, warm = fake.usages
    assert cold["cache_read_input_tokens"] == 0 and cold["cache_creation_input_tokens"] > 500
    assert warm["cache_read_input_tokens"] == cold["cache_creation_input_tokens"]
    assert warm["cache_creation_input_tokens"] == 0
    assert warm["input_tokens"] < warm["cache_read_input_tokens"]  # only the new turn is paid in full


async def test_consecutive_tool_results_merge_into_one_user_turn(fake: FakeAnthropic) -> None:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}} for i in (1, 2, 3)
    ]
    messages = [
        {"role": "user", "content": "read three"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i}"} for i in (1, 2, 3)),
        {"role": "user", "content": "and now?"},  # a new message after results (a turn that was cut short)
    ]
    fake.script(text("read"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=messages, tools=[READ_SPEC], temperature=None)
    [sent] = fake.requests
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    results = sent["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result"] * 3 + ["text"]
    assert [b.get("tool_use_id") for b in results[:3]] == ["c1", "c2", "c3"]
    assert fake.rejected == []


async def test_tool_ids_another_provider_wrote_are_mapped_to_ids_the_api_accepts(fake: FakeAnthropic) -> None:
    # A failover replays the turn so far: ids from an OpenAI-compatible server may hold anything.
    odd = ["functions.read:0", "functions.read:0 ", "call_ok-1", "é" * 70, ""]
    calls = [{"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}} for i in odd]
    messages = [
        {"role": "user", "content": "read them"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": i, "content": "x"} for i in odd),
    ]
    fake.script(text("read"), text("read again"))
    async with _provider(fake.base_url) as provider:
        for _ in range(2):
            await provider.complete(model="m", messages=messages, tools=[READ_SPEC], temperature=None)
    assert fake.rejected == []  # the fake checks ^[a-zA-Z0-9_-]+$ as the API does
    first, second = fake.requests
    uses = [b["id"] for b in first["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in first["messages"][2]["content"]]
    assert uses == results and len(set(uses)) == len(odd)  # each call keeps its result; no two collide
    assert uses[2] == "call_ok-1" and uses[0].startswith("functions_read_0_")  # valid ids stay as they are
    assert all(len(u) <= 64 for u in uses)
    assert [b["id"] for b in second["messages"][1]["content"]] == uses  # the same mapping every time


async def test_a_window_opening_on_the_assistant_gets_a_user_turn_first(fake: FakeAnthropic) -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "assistant", "content": None},  # an empty answer: dropped, the API refuses empty content
        {"role": "user", "content": "go on"},
    ]
    fake.script(text("ok"))
    async with _provider(fake.base_url) as provider:
        await provider.complete(model="m", messages=messages, tools=(), temperature=None)
    [sent] = fake.requests
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert fake.rejected == []


async def test_tool_use_reply_maps_to_tool_calls_with_json_arguments(fake: FakeAnthropic) -> None:
    fake.script(tool_use("search", {"q": "cats"}, id="toolu_a", content="let me look"))
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=[SEARCH_SPEC], temperature=None)
    assert completion == Completion(
        text="let me look", tool_calls=(ToolCall(id="toolu_a", name="search", arguments='{"q": "cats"}'),)
    )


async def test_streamed_tool_use_assembles_input_json_deltas_like_the_unstreamed_answer(fake: FakeAnthropic) -> None:
    reply = tool_use("read", {"path": "notes/a-rather-long-file-name.txt", "lines": [1, 2, 3]}, id="toolu_r")
    fake.script(reply, reply)
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        plain = await provider.complete(model="m", messages=USER, tools=[READ_SPEC], temperature=None)
        streamed = await provider.complete(model="m", messages=USER, tools=[READ_SPEC], temperature=None, on_text=sink)
    assert streamed == plain
    assert plain.tool_calls[0].arguments == '{"path": "notes/a-rather-long-file-name.txt", "lines": [1, 2, 3]}'
    assert sink.pieces == []
    assert [sent.get("stream") for sent in fake.requests] == [None, True]


async def test_overloaded_529_is_retried_then_unavailable_with_its_type(fake: FakeAnthropic) -> None:
    fake.script(*[error(529, message="Overloaded", retry_after=FAST)] * 3)
    async with _provider(fake.base_url, max_retries=2) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert (caught.value.status, caught.value.error_type) == (529, "overloaded_error")
    assert caught.value.reason == "HTTP 529 overloaded_error: Overloaded"
    assert len(fake.requests) == 3


async def test_server_error_500_after_retries_is_unavailable(fake: FakeAnthropic) -> None:
    fake.script(*[error(500, message="Internal server error", retry_after=FAST)] * 2)
    async with _provider(fake.base_url, max_retries=1) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert (caught.value.status, caught.value.error_type) == (500, "api_error")


async def test_bad_request_carries_the_api_message_and_is_not_retried(fake: FakeAnthropic) -> None:
    fake.script(error(400, message="model: unknown model 'nope'"))
    async with _provider(fake.base_url, max_retries=2) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(model="nope", messages=USER, tools=(), temperature=None)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert caught.value.reason == "HTTP 400 invalid_request_error: model: unknown model 'nope'"
    assert caught.value.status == 400
    assert len(fake.requests) == 1


async def test_a_request_the_api_refuses_surfaces_its_validation_message(fake: FakeAnthropic) -> None:
    unanswered = {"id": "c9", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": None, "tool_calls": [unanswered]},
        {"role": "user", "content": "never mind"},
    ]
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(model="m", messages=messages, tools=[READ_SPEC], temperature=None)
    assert caught.value.status == 400
    assert "`tool_use` ids were found without `tool_result` blocks immediately after: c9" in caught.value.reason


async def test_error_event_mid_stream_raises_the_mapped_error(fake: FakeAnthropic) -> None:
    fake.script(stream_error(529, message="Overloaded"))
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=Pieces())
    assert (caught.value.status, caught.value.error_type) == (529, "overloaded_error")
    assert "Overloaded" in caught.value.reason


async def test_stream_cut_off_raises_provider_unavailable_after_the_pieces_so_far(fake: FakeAnthropic) -> None:
    # message_start, ping, content_block_start, "one", " two", then the connection drops
    fake.script(cut_off(text("one two three four"), after=5))
    sink = Pieces()
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderUnavailable, match="the stream broke off: Response payload is not completed"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=sink)
    # a piece may hold several tokens (one per network read), never text after the break
    assert "".join(sink.pieces) == "one two" and all(sink.pieces)


async def test_a_stream_dropped_before_its_first_event_is_unavailable(fake: FakeAnthropic) -> None:
    fake.script(cut_off(text("x"), after=0))
    async with _provider(fake.base_url) as provider:
        with pytest.raises(ProviderUnavailable, match="the stream broke off"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=Pieces())


async def test_what_on_text_raises_propagates_unchanged(fake: FakeAnthropic) -> None:
    fake.script(text("never finished"), text("still usable"))

    async def refuse(piece: str) -> None:
        raise LookupError(f"sink refused {piece!r}")

    async with _provider(fake.base_url) as provider:
        with pytest.raises(LookupError, match="sink refused 'never"):
            await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=refuse)
        after = await provider.complete(model="m", messages=USER, tools=(), temperature=None, on_text=Pieces())
    assert after.text == "still usable"


async def test_base_url_with_v1_suffix_reaches_the_same_endpoint(fake: FakeAnthropic) -> None:
    fake.script(text("ok"))
    async with _provider(fake.base_url + "/v1/") as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion.text == "ok"


async def test_dynamic_reply_sees_the_mapped_request(fake: FakeAnthropic) -> None:
    def echo(request: dict[str, Any]) -> Reply:
        return text(f"{request['model']}: {request['messages'][-1]['content'][0]['text']}")

    fake.script(echo)
    async with _provider(fake.base_url) as provider:
        completion = await provider.complete(model="m", messages=USER, tools=(), temperature=None)
    assert completion.text == "m: hi"


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_answer_keeps_the_messages_id_model_and_stop_reason(fake: FakeAnthropic, streamed: bool) -> None:
    fake.script(text("hello"), tool_use("read", {}, id="toolu_r"))
    on_text = Pieces() if streamed else None
    async with _provider(fake.base_url) as provider:
        said = await provider.complete(model="m", messages=USER, tools=[READ_SPEC], temperature=None, on_text=on_text)
        called = await provider.complete(model="m", messages=USER, tools=[READ_SPEC], temperature=None, on_text=on_text)
    assert [(c.response_id, c.response_model, c.finish_reason) for c in (said, called)] == [
        ("msg_fake0001", "m", "end_turn"), ("msg_fake0002", "m", "tool_use"),
    ]
