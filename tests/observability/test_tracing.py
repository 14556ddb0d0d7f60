"""[telemetry]: turn, model and tool spans with the GenAI attributes; an OTLP/HTTP collector receives them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orchestrator import cli
from orchestrator.daemon import Runtime
from tests.fakes.loopback import serving
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call, with_usage
from tests.observability.kit import daemon, daemon_toml, write

def _telemetry(endpoint: str | None) -> str:
    return "[telemetry]\nservice_name = \"orchestrator-test\"\n" + (
        f'endpoint = "{endpoint}"\n' if endpoint is not None else 'exporter = "none"\n'
    )


def _memory(runtime: Runtime) -> InMemorySpanExporter:
    tracing = runtime.observability.tracing
    assert tracing is not None
    exporter = InMemorySpanExporter()
    tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_turn_span_holds_its_model_and_tool_spans_with_genai_attributes(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    config = daemon_toml(fake_llm, gateway="", telemetry=_telemetry(None)).replace('metrics_token = "file:scrape.token"\n', "")
    async with daemon(write(tmp_path, config)) as (runtime, term, _):
        spans = _memory(runtime)
        fake_llm.script(tool_call("list_dir", {"path": "."}), text("listed"))
        term.type("what is there?")
        await term.screen.wait_for(lambda ls: "listed" in ls)
        finished = spans.get_finished_spans()
    by_name = {span.name: span for span in finished}
    turn, tool = by_name["invoke_agent helper"], by_name["execute_tool list_dir"]
    chats = [span for span in finished if span.name == "chat m"]
    assert len(chats) == 2 and len(finished) == 4
    assert _attrs(turn) | {"gen_ai.conversation.id": "-"} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper", "gen_ai.conversation.id": "-",
        "gen_ai.request.model": "m", "gen_ai.provider.name": "openai", "gen_ai.response.model": "m",
        "orchestrator.channel": "term", "orchestrator.path": "channel", "orchestrator.stop_reason": "completed",
        "orchestrator.tools_run": 1,
    }
    assert _attrs(turn)["gen_ai.conversation.id"] == "term:terminal:alice"
    chat = _attrs(chats[0])
    assert {k: chat[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "server.address")} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
    }
    assert _attrs(tool) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "list_dir", "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": _attrs(tool)["gen_ai.tool.call.id"], "orchestrator.tool.ran": True,
    }
    # one trace: the model and tool spans are the turn span's children
    assert {span.context.trace_id for span in finished} == {turn.context.trace_id}
    assert all(span.parent is not None and span.parent.span_id == turn.context.span_id for span in [*chats, tool])
    assert turn.parent is None


async def test_a_chat_span_carries_the_answers_usage_id_model_and_finish_reason(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    config = daemon_toml(fake_llm, gateway="", telemetry=_telemetry(None)).replace('metrics_token = "file:scrape.token"\n', "")
    async with daemon(write(tmp_path, config)) as (runtime, term, _):
        spans = _memory(runtime)
        fake_llm.served_model = "m-2026-01-01"  # the snapshot that wrote it, as OpenAI names it
        fake_llm.script(
            with_usage(tool_call("list_dir", {"path": "."}), prompt=120, completion=9, cached=100),
            with_usage(text("listed"), prompt=150, completion=4),
        )
        term.type("what is there?")
        await term.screen.wait_for(lambda ls: "listed" in ls)
        finished = spans.get_finished_spans()
    chats = sorted((span for span in finished if span.name == "chat m"), key=lambda span: span.start_time or 0)
    keys = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.model",
            "gen_ai.response.finish_reasons")
    assert [tuple(_attrs(span)[k] for k in keys) for span in chats] == [
        (120, 9, "m-2026-01-01", ("tool_calls",)),  # input counts the cached part, as the conventions ask
        (150, 4, "m-2026-01-01", ("stop",)),
    ]
    ids = [_attrs(span)["gen_ai.response.id"] for span in chats]
    assert len(set(ids)) == 2 and all(str(i).startswith("chatcmpl-fake-") for i in ids)
    # the turn span names what the turn asked for; the chat spans what answered
    turn = next(span for span in finished if span.name == "invoke_agent helper")
    assert _attrs(turn)["gen_ai.request.model"] == "m"


async def test_a_provider_failure_marks_the_model_span_and_the_turn(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    config = daemon_toml(fake_llm, gateway="", telemetry=_telemetry(None)).replace('metrics_token = "file:scrape.token"\n', "")
    async with daemon(write(tmp_path, config)) as (runtime, term, _):
        spans = _memory(runtime)
        fake_llm.script(status(503))
        term.type("hello?")
        await term.screen.wait_for(lambda ls: any("provider failed" in line for line in ls))
        finished = spans.get_finished_spans()
    chat = next(span for span in finished if span.name == "chat m")
    turn = next(span for span in finished if span.name == "invoke_agent helper")
    assert (_attrs(chat)["error.type"], _attrs(chat)["http.response.status_code"]) == ("overloaded", 503)
    assert not any(key.startswith(("gen_ai.usage.", "gen_ai.response.")) for key in _attrs(chat))  # no answer came
    assert chat.status.is_ok is False and turn.status.is_ok is False
    assert _attrs(turn)["orchestrator.stop_reason"] == "provider_error"


async def test_spans_reach_an_otlp_http_collector(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    received: list[ExportTraceServiceRequest] = []

    async def traces(request: web.Request) -> web.Response:
        assert request.headers["Content-Type"] == "application/x-protobuf"
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        received.append(message)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    async with serving(app) as origin:
        config = daemon_toml(fake_llm, gateway="", telemetry=_telemetry(f"{origin}/v1/traces"))
        async with daemon(write(tmp_path, config.replace('metrics_token = "file:scrape.token"\n', ""))) as (_, term, _):
            fake_llm.script(text("traced"))
            term.type("hi")
            await term.screen.wait_for(lambda ls: "traced" in ls)
        # closing the daemon flushed the batch to the collector
    spans = [span for message in received for rs in message.resource_spans for ss in rs.scope_spans for span in ss.spans]
    services = {
        attr.value.string_value for message in received for rs in message.resource_spans
        for attr in rs.resource.attributes if attr.key == "service.name"
    }
    assert sorted(span.name for span in spans) == ["chat m", "invoke_agent helper"]
    assert services == {"orchestrator-test"}


def test_telemetry_without_the_packages_is_one_clear_start_error(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    config = daemon_toml(fake_llm, gateway="", telemetry=_telemetry(None)).replace('metrics_token = "file:scrape.token"\n', "")
    path = write(tmp_path, config)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if the extra were not installed
    assert cli.main(["run", "--config", str(path)]) == 1
    err = capfd.readouterr().err
    assert (
        "[telemetry] is configured but the OpenTelemetry package 'opentelemetry-sdk' is not installed: "
        "pip install 'orchestrator[telemetry]' (or remove [telemetry])"
    ) in err
    assert "Traceback" not in err
    assert not (tmp_path / "state" / "sessions.sqlite3").exists()  # refused before opening anything
