"""L2 parity for `media` on the paths that take uploads: the library, the gateway (JSON and multipart).

The same attachments, driven through each real entry point (`orchestrator.Agent.run`, an
HTTP request to a gateway in a Runtime, as base64 and as form parts), must reach the model
as the same content parts and be refused with the same line for the same reason: one
resolved policy, one intake. (The channel and ACP paths are covered beside their adapters.)
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import orchestrator
from orchestrator.library import Attachment, MediaRefused
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import call, gateway_toml, serving, write
from tests.media.samples import JPEG, PDF

MEDIA = """
[agents.ops.media]
accept = ["image", "document"]
max_bytes = 50000
image_detail = "low"
"""

# (attachment kind, mime, name, bytes) -> the agent: each refused for a different rule
REFUSED: list[tuple[str, str, str, str, bytes]] = [
    ("intern", "image", "image/jpeg", "dot.jpg", JPEG),  # no [media] at all
    ("ops", "voice", "audio/ogg", "v.ogg", b"OggS" + b"\x00" * 40),  # a kind it does not accept
    ("ops", "document", "application/x-msdownload", "x.exe", b"MZ"),  # a type the core cannot read
    ("ops", "image", "image/png", "fake.png", b"not a png at all"),  # a damaged picture
]


def _toml(base_url: str) -> str:
    return gateway_toml(base_url).replace("temperature = 0.2", "temperature = 0.2\nvision = true") + MEDIA


def _normalised(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content parts with the upload paths (dated, maybe suffixed) reduced to their kind."""
    out = []
    for part in parts:
        if part["type"] == "text":
            out.append({"type": "text", "mentions_extract": ".pdf.txt" in part["text"], "starts": part["text"][:5]})
        else:
            out.append(part)
    return out


async def test_the_same_attachments_reach_the_model_alike_on_library_and_gateway(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    path = write(tmp_path, _toml(fake_llm.base_url))
    report = tmp_path / "r.pdf"
    report.write_bytes(PDF)
    fake_llm.script(text("library"), text("json"), text("form"))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        await agent.run("look at these", attachments=[
            Attachment.from_bytes(JPEG, name="dot.jpg", mime="image/jpeg"), Attachment.from_path(report),
        ])
    async with serving(path) as (_, gw):
        files = [
            {"kind": "image", "mime": "image/jpeg", "data": base64.b64encode(JPEG).decode(), "name": "dot.jpg"},
            {"kind": "document", "mime": "application/pdf", "data": base64.b64encode(PDF).decode(), "name": "r.pdf"},
        ]
        status, body, _ = await call(
            gw, "POST", "/api/agents/ops/messages", json={"text": "look at these", "attachments": files}
        )
        assert (status, body["reply"]) == (200, "json")
        form = aiohttp.FormData()
        form.add_field("text", "look at these")
        form.add_field("image", JPEG, filename="dot.jpg", content_type="image/jpeg")
        form.add_field("document", PDF, filename="r.pdf", content_type="application/pdf")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        assert (status, body["reply"]) == (200, "form")
    assert [e.identity.path for e in seen] == [
        ConstructionPath.LIBRARY, ConstructionPath.GATEWAY_CHAT, ConstructionPath.GATEWAY_CHAT,
    ]
    library, gateway, _ = seen
    assert library.media.describe() == gateway.media.describe()  # one resolved policy
    library_parts, json_parts, form_parts = (_normalised(p) for p in fake_llm.parts)
    assert library_parts == json_parts == form_parts
    assert [p["type"] for p in library_parts] == ["text", "image_url"]
    assert library_parts[0]["mentions_extract"] and library_parts[1]["image_url"]["detail"] == "low"


@pytest.mark.parametrize(("agent", "kind", "mime", "name", "data"), REFUSED)
async def test_a_refused_attachment_gets_the_same_line_on_library_and_gateway(
    agent: str, kind: str, mime: str, name: str, data: bytes, tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    path = write(tmp_path, _toml(fake_llm.base_url))
    async with orchestrator.Agent.from_config(path, agent) as library:
        with pytest.raises(MediaRefused) as refused:
            await library.run("this", attachments=[Attachment.from_bytes(data, name=name, mime=mime, kind=kind)])
    details = [refused.value.reason]
    async with serving(path) as (runtime, gw):
        inline = {"kind": kind, "mime": mime, "data": base64.b64encode(data).decode(), "name": name}
        status, body, _ = await call(gw, "POST", f"/api/agents/{agent}/messages", json={"attachments": [inline]})
        details.append(body["detail"])
        assert (status, body["error"]) == (422, "media_refused")
        form = aiohttp.FormData()
        form.add_field(kind, data, filename=name, content_type=mime)
        status, body, _ = await call(gw, "POST", f"/api/agents/{agent}/messages", data=form)
        details.append(body["detail"])
        assert (status, body["error"]) == (422, "media_refused")
        workspace = runtime.config.state_path().with_name("state-workspaces") / agent
    assert len(set(details)) == 1, details
    assert not (workspace / "uploads").exists() or not [p for p in (workspace / "uploads").rglob("*") if p.is_file()]
    assert fake_llm.requests == []
