"""Base64 attachments on the gateway's messages endpoint, through the same intake as chats."""

from __future__ import annotations

import base64
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import call, gateway_toml, serving, write
from tests.media.samples import JPEG, PDF, PDF_TEXT

MEDIA = """
[agents.ops.media]
accept = ["image", "document"]
max_bytes = 50000
"""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_an_image_reaches_a_vision_agent_and_a_pdf_lands_in_its_workspace(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    toml = gateway_toml(fake_llm.base_url).replace('temperature = 0.2', 'temperature = 0.2\nvision = true') + MEDIA
    async with serving(write(tmp_path, toml)) as (runtime, gw):
        fake_llm.script(text("a white dot"), text("read it"))
        picture = {"kind": "image", "mime": "image/jpeg", "data": b64(JPEG), "name": "dot.jpg"}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"attachments": [picture]})
        assert (status, body["reply"]) == (200, "a white dot")
        (image,) = [p for p in fake_llm.parts[-1] if p["type"] == "image_url"]
        assert image["image_url"]["url"] == "data:image/jpeg;base64," + b64(JPEG)
        report = {"kind": "document", "mime": "application/pdf", "data": b64(PDF), "name": "r.pdf"}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "summarise", "attachments": [report]})
        assert status == 200
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        (extract,) = workspace.glob("uploads/*/r.pdf.txt")
        assert PDF_TEXT in extract.read_text()
        user = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
        assert user.startswith("summarise") and "r.pdf.txt" in user
        # the gateway has no chat: send_file is never offered there
        assert all(t["function"]["name"] != "send_file" for t in fake_llm.requests[-1].get("tools", []))


async def test_refusals_are_one_clear_answer_and_no_turn(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url) + MEDIA)) as (runtime, gw):
        picture = {"kind": "image", "mime": "image/jpeg", "data": b64(JPEG)}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"attachments": [picture]})
        assert (status, body["error"]) == (422, "media_refused")
        assert body["detail"] == "This agent cannot look at pictures; please describe it in words instead."
        big = {"kind": "document", "mime": "application/pdf", "data": b64(PDF + b" " * 60_000)}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"attachments": [big]})
        assert (status, body["detail"]) == (422, "That file is too large: the limit is 50,000 bytes.")
        status, body, _ = await call(gw, "POST", "/api/agents/intern/messages", json={"text": "x", "attachments": [picture]})
        assert (status, body["detail"]) == (422, "I can't take files here.")
        bad = {"kind": "image", "mime": "image/jpeg", "data": "not base64!"}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"attachments": [bad]})
        assert (status, body["error"]) == (400, "bad_request")
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        assert not list(workspace.glob("uploads/*/*"))
    assert fake_llm.requests == []
