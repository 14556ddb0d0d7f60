"""`multipart/form-data` on the gateway's messages endpoint: files streamed under the agent's caps, one intake."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from loguru import logger

from orchestrator.daemon import Runtime
from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import AUTH, call, gateway_toml, serving, write
from tests.media.samples import JPEG, PDF, PDF_TEXT

MEDIA = """
[agents.ops.media]
accept = ["image", "document"]
max_bytes = 50000
max_message_bytes = 80000
"""


def _vision(base_url: str, *, gateway: str | None = None) -> str:
    toml = gateway_toml(base_url) if gateway is None else gateway_toml(base_url, gateway=gateway)
    return toml.replace("temperature = 0.2", "temperature = 0.2\nvision = true") + MEDIA


def _uploads(runtime: Runtime, agent: str = "ops") -> list[Path]:
    """Every file and folder under the agent's uploads, hidden ones (staging, partial files) included."""
    workspace = runtime.config.state_path().with_name("state-workspaces") / agent
    return sorted((workspace / "uploads").rglob("*")) if (workspace / "uploads").exists() else []


def _files(runtime: Runtime) -> list[str]:
    return sorted(p.name for p in _uploads(runtime) if p.is_file())


async def test_an_image_and_a_pdf_arrive_as_form_parts_and_go_through_the_intake(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        fake_llm.script(text("a white dot and a report"))
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "what are these?")
        form.add_field("session", "form-1")
        form.add_field("image", JPEG, filename="dot.jpg", content_type="image/jpeg")
        form.add_field("document", PDF, filename="r.pdf", content_type="application/pdf")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["reply"], body["session"]) == (200, "a white dot and a report", "form-1")
        (image,) = [p for p in fake_llm.parts[-1] if p["type"] == "image_url"]
        assert image["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
        user = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
        assert user[0]["text"].startswith("what are these?") and "r.pdf.txt" in user[0]["text"]
        (extract,) = [p for p in _uploads(runtime) if p.name == "r.pdf.txt"]
        assert PDF_TEXT in extract.read_text()
        # the staging folder is gone: only the intake's files remain
        assert _files(runtime) == ["dot.jpg", "r.pdf", "r.pdf.txt"]
        assert not [p for p in _uploads(runtime) if p.name.startswith(".")]


async def test_a_form_with_only_a_file_needs_no_text_and_is_idempotent(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        fake_llm.script(text("a dot"))

        def form(data: bytes) -> aiohttp.FormData:
            built = aiohttp.FormData()
            built.add_field("image", data, filename="dot.jpg", content_type="image/jpeg")
            return built

        headers = {**AUTH, "Idempotency-Key": "form-key"}
        first = await call(gw, "POST", "/api/agents/ops/messages", data=form(JPEG), headers=headers)
        again = await call(gw, "POST", "/api/agents/ops/messages", data=form(JPEG), headers=headers)
        assert (first[0], first[1]["reply"]) == (200, "a dot")
        assert (again[0], again[1], again[2].get("Idempotent-Replayed")) == (200, first[1], "true")
        # the same key with other bytes is another request
        other = await call(gw, "POST", "/api/agents/ops/messages", data=form(JPEG + b"\x00"), headers=headers)
        assert (other[0], other[1]["error"]) == (422, "idempotency_key_reused")
        assert len(fake_llm.requests) == 1
        assert _files(runtime) == ["dot.jpg"]


async def test_a_file_over_max_bytes_is_refused_413_while_streaming_and_nothing_is_kept(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "read this")
        form.add_field("document", PDF + b" " * 60_000, filename="big.pdf", content_type="application/pdf")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["error"]) == (413, "payload_too_large")
        assert body["detail"] == "'big.pdf' is too large: this agent takes at most 50,000 bytes per file; nothing was kept"
        # two files under the per-file cap, over the message's together
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("document", PDF + b" " * 45_000, filename="a.pdf", content_type="application/pdf")
        form.add_field("document", PDF + b" " * 45_000, filename="b.pdf", content_type="application/pdf")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["error"]) == (413, "payload_too_large")
        assert "'b.pdf' is too large" in body["detail"] and "for one message's files together" in body["detail"]
        assert _uploads(runtime) == [] or all(p.is_dir() for p in _uploads(runtime))
        assert _files(runtime) == []
    assert fake_llm.requests == []


async def test_an_agent_without_media_is_refused_at_the_first_part_without_reading_it(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        boundary = "orchestrator-test-boundary"
        sent_rest = asyncio.Event()
        never = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield (
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"dot.jpg\"\r\n"
                "Content-Type: image/jpeg\r\n\r\n"
            ).encode() + JPEG
            # the rest of the file never comes: a handler that read on would wait here forever
            await never.wait()
            sent_rest.set()
            yield f"\r\n--{boundary}--\r\n".encode()

        headers = {**AUTH, "Content-Type": f"multipart/form-data; boundary={boundary}"}
        async with aiohttp.ClientSession() as session:
            async with session.post(gw.url + "/api/agents/intern/messages", data=body(), headers=headers) as response:
                status, answer = response.status, await response.json()
        assert (status, answer["error"], answer["detail"]) == (422, "media_refused", "I can't take files here.")
        assert not sent_rest.is_set()
        workspace = runtime.config.state_path().with_name("state-workspaces") / "intern"
        assert not (workspace / "uploads").exists() or not any((workspace / "uploads").rglob("*"))
        # a vision agent refuses a kind it does not accept the same way, from the headers
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("voice", b"OggS" + b"\x00" * 60, filename="v.ogg", content_type="audio/ogg")
        status, answer, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, answer["detail"]) == (422, "I can't take voice messages here.")
        assert _files(runtime) == []
    assert fake_llm.requests == []


async def test_malformed_forms_are_one_clear_400(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        cases: list[tuple[aiohttp.FormData, str]] = []
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("picture", JPEG, filename="dot.jpg", content_type="image/jpeg")
        cases.append((form, "a file part is named by its kind"))
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "hi")
        form.add_field("extra", "x")
        cases.append((form, "unexpected form field 'extra'"))
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "   ")
        cases.append((form, "'text' must be a non-empty string"))
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "hi")
        form.add_field("session", "../../etc")
        cases.append((form, "'session' must be 1-128 characters"))
        form = aiohttp.FormData(default_to_multipart=True)
        for index in range(11):
            form.add_field("image", JPEG, filename=f"{index}.jpg", content_type="image/jpeg")
        cases.append((form, "a form carries at most 10 files"))
        for data, expected in cases:
            status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=data)
            assert (status, body["error"]) == (400, "bad_request"), expected
            assert expected in body["detail"]
        # a truncated body (no closing boundary) is bad input too, and leaves nothing behind
        headers = {**AUTH, "Content-Type": "multipart/form-data; boundary=b"}
        broken = b'--b\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\nContent-Type: image/jpeg\r\n\r\n' + JPEG
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=broken, headers=headers)
        assert (status, body["error"]) == (400, "bad_request")
        assert _files(runtime) == [] and not [p for p in _uploads(runtime) if p.name.startswith(".")]
        status, body, _ = await call(gw, "POST", "/api/agents/nobody/messages", data=aiohttp.FormData({"text": "hi"}, default_to_multipart=True))
        assert (status, body["error"]) == (404, "unknown_agent")
    assert fake_llm.requests == []


async def test_a_text_field_over_max_body_bytes_is_413(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    gateway = 'port = 0\ntoken = "file:gateway.token"\nmax_body_bytes = 1024\n'
    async with serving(write(tmp_path, _vision(fake_llm.base_url, gateway=gateway))) as (_, gw):
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("text", "x" * 2000)
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["error"]) == (413, "payload_too_large")
        assert body["detail"] == "the form field 'text' is over 1,024 bytes"
        # files are bounded by the agent's media caps, not by max_body_bytes
        fake_llm.script(text("a dot"))
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("image", JPEG + b"\x00" * 4000, filename="dot.jpg", content_type="image/jpeg")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["reply"]) == (200, "a dot")



async def test_uploads_leading_out_of_the_jail_store_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        outside = tmp_path / "outside"
        outside.mkdir()
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "uploads").symlink_to(outside, target_is_directory=True)
        form = aiohttp.FormData()
        form.add_field("image", JPEG, filename="dot.jpg", content_type="image/jpeg")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["error"]) == (422, "media_refused")
        assert body["detail"] == "I could not store that file (the workspace is not writable)."
    assert list(outside.iterdir()) == [] and fake_llm.requests == []


async def test_a_client_that_goes_away_mid_upload_leaves_nothing_behind(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    errors: list[str] = []
    sink = logger.add(lambda message: errors.append(str(message)), level="ERROR", format="{message}")
    async with serving(write(tmp_path, _vision(fake_llm.base_url))) as (runtime, gw):
        boundary = "gone-away"
        staged = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield (
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"document\"; filename=\"half.pdf\"\r\n"
                "Content-Type: application/pdf\r\n\r\n"
            ).encode() + PDF[:200]
            # wait until the server has started staging this part, then drop the connection
            while not [p for p in _uploads(runtime) if p.name.startswith(".incoming-")]:
                await asyncio.sleep(0.02)
            staged.set()
            raise ConnectionAbortedError("the client went away")

        headers = {**AUTH, "Content-Type": f"multipart/form-data; boundary={boundary}"}
        async with aiohttp.ClientSession() as session:
            try:
                async with session.post(gw.url + "/api/agents/ops/messages", data=body(), headers=headers):
                    pass
            except (aiohttp.ClientError, ConnectionAbortedError):
                pass  # the client's own failure: what matters is what the server kept
        assert staged.is_set()
        async with asyncio.timeout(15):
            while _uploads(runtime) and any(p.name.startswith(".") for p in _uploads(runtime)):
                await asyncio.sleep(0.05)
        assert _files(runtime) == []
    logger.remove(sink)
    assert errors == []  # a client going away is not the gateway's failure
    assert fake_llm.requests == []
