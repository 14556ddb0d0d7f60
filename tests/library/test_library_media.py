"""Attachments on the library path: `Agent.run(..., attachments=[...])` through the one media intake."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

import orchestrator
from orchestrator.library import Attachment, AttachmentUnreadable, MediaRefused
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.fakes.openai_server import FakeOpenAI, text
from tests.gateway.kit import gateway_toml, write
from tests.media.samples import JPEG, PDF, PDF_TEXT

MEDIA = """
[agents.ops.media]
accept = ["image", "document"]
max_bytes = 50000
"""


def _config(tmp_path: Path, base_url: str) -> Path:
    toml = gateway_toml(base_url).replace("temperature = 0.2", "temperature = 0.2\nvision = true") + MEDIA
    return write(tmp_path, toml)


def _uploads(tmp_path: Path, agent: str = "ops") -> list[str]:
    root = tmp_path / "state-workspaces" / agent / "uploads"
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_an_image_in_bytes_and_a_pdf_on_disk_reach_the_model(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(PDF)
    fake_llm.script(text("a dot and a report"))
    async with orchestrator.Agent.from_config(_config(tmp_path, fake_llm.base_url), "ops") as agent:
        result = await agent.run(
            "what are these?",
            attachments=[orchestrator.Attachment.from_bytes(JPEG, name="dot.jpg", mime="image/jpeg"),
                         Attachment.from_path(report)],
        )
    assert result.text == "a dot and a report"
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.LIBRARY and execution.media.accept == {"image", "document"}
    parts = fake_llm.parts[0]
    assert parts[0]["type"] == "text" and parts[0]["text"].startswith("what are these?")
    assert "report.pdf.txt" in parts[0]["text"]
    (image,) = [p for p in parts if p["type"] == "image_url"]
    assert image["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
    assert _uploads(tmp_path) == ["dot.jpg", "report.pdf", "report.pdf.txt"]
    (extract,) = (tmp_path / "state-workspaces" / "ops" / "uploads").rglob("report.pdf.txt")
    assert PDF_TEXT in extract.read_text()


async def test_refusals_raise_media_refused_run_no_turn_and_keep_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(PDF + b" " * 60_000)
    fake_llm.script(text("only text"))
    async with orchestrator.Agent.from_config(_config(tmp_path, fake_llm.base_url), "ops") as agent:
        with pytest.raises(MediaRefused) as refused:
            await agent.run("read it", attachments=[Attachment.from_path(big)], session="s")
        assert refused.value.reason == "That file is too large: the limit is 50,000 bytes."
        with pytest.raises(MediaRefused) as refused:
            await agent.run("hear it", attachments=[Attachment.from_bytes(b"OggS", name="v.ogg", mime="audio/ogg")])
        assert refused.value.reason == "I can't take audio files here."
        with pytest.raises(MediaRefused, match="damaged"):
            await agent.run("look", attachments=[Attachment.from_bytes(b"not a jpeg", name="x.jpg", mime="image/jpeg")])
        with pytest.raises(AttachmentUnreadable, match="missing.pdf"):
            await agent.run("read it", attachments=[Attachment.from_path(tmp_path / "missing.pdf")])
        assert (await agent.run("hello", session="s")).text == "only text"
    assert _uploads(tmp_path) == []
    # the refused turns left nothing in the session: the one request holds the one message
    (request,) = fake_llm.requests
    assert [m["content"] for m in request["messages"] if m["role"] == "user"] == ["hello"]


async def test_an_agent_without_media_never_reads_the_file(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    # a FIFO with no writer: opening it to read would block forever, so the refusal proves it was not read
    pipe = tmp_path / "photo.jpg"
    os.mkfifo(pipe)
    async with orchestrator.Agent.from_config(_config(tmp_path, fake_llm.base_url), "intern") as agent:
        with pytest.raises(MediaRefused) as refused:
            await agent.run("look", attachments=[Attachment.from_path(pipe)])
    assert refused.value.reason == "I can't take files here."
    assert _uploads(tmp_path, "intern") == [] and fake_llm.requests == []


def test_an_attachment_is_a_known_kind_and_either_a_path_or_bytes(tmp_path: Path) -> None:
    assert Attachment.from_path(tmp_path / "a.png").kind == "image"
    assert Attachment.from_path(tmp_path / "a.png").mime == "image/png"
    assert Attachment.from_path(tmp_path / "notes.txt").kind == "document"
    assert Attachment.from_bytes(b"x", name="v.ogg", mime="audio/ogg", kind="voice").kind == "voice"
    with pytest.raises(ValueError, match="kind must be one of"):
        Attachment.from_bytes(b"x", name="x", mime="text/plain", kind="sticker")
    with pytest.raises(ValueError, match="either a path or bytes"):
        Attachment(kind="document", mime="text/plain")
    with pytest.raises(ValueError, match="either a path or bytes"):
        Attachment(kind="document", mime="text/plain", path=tmp_path, data=b"x")
