"""Parity for the PDF parser child's limits (`[agents.X.media] pdf_*`): one value on every path, one line for a costly file.

Every construction path resolves the same limits and the same sandbox (never narrowed:
a path that takes no uploads still shows what a PDF would get); the live matrix's `media`
row carries them with no gap. L2: the same costly PDF through the library, the gateway's
JSON and its multipart form is stopped at the written deadline with the same line, and
nothing is kept.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import aiohttp
import pytest

import orchestrator
from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.library import Attachment, MediaRefused
from orchestrator.seam import ConstructionPath, Services, build_on_path, media_as_written
from orchestrator.tools import bwrap_error, landlock_error
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.kit import call, gateway_toml, serving, write
from tests.media.samples import costly_pdf

pytestmark = pytest.mark.slow

LIMITS = """
[agents.ops.media]
accept = ["document"]
pdf_timeout_s = 1.5
pdf_cpu_s = 7
pdf_memory_mb = 320
"""
STRONGEST = "bwrap" if bwrap_error() is None else "landlock" if landlock_error(False) is None else "none"


def test_every_path_resolves_the_written_parser_limits_under_the_strongest_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, gateway_toml("http://127.0.0.1:9/v1") + LIMITS)
    config = load_config(path)
    written = media_as_written(config, "ops")
    assert written is not None
    assert written.pdf.describe() == [
        f"pdf_sandbox:{STRONGEST}", "pdf_timeout_s:1.5", "pdf_cpu_s:7", "pdf_memory_mb:320",
    ]
    # the agent's shell sandbox plays no part: `intern` has no shell at all, ops a refused or confined one
    services = Services()
    for agent in ("ops", "intern"):
        for construction in ConstructionPath:
            pdf = build_on_path(config, agent, construction, services).media.pdf
            assert pdf.sandbox == STRONGEST, (agent, construction)
            if agent == "ops":
                assert pdf == written.pdf, construction
    assert cli.main(["policy", "matrix", "--json", "--agent", "ops", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert grid["gaps"] == []


async def test_a_costly_pdf_gets_the_same_line_on_library_and_gateway(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url) + LIMITS)
    data, mime, name = costly_pdf(), "application/pdf", "costly.pdf"
    async with orchestrator.Agent.from_config(path, "ops") as library:
        with pytest.raises(MediaRefused) as refused:
            await library.run("read this", attachments=[Attachment.from_bytes(data, name=name, mime=mime, kind="document")])
    details = [refused.value.reason]
    async with serving(path) as (runtime, gw):
        inline = {"kind": "document", "mime": mime, "data": base64.b64encode(data).decode(), "name": name}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"attachments": [inline]})
        details.append(body["detail"])
        assert (status, body["error"]) == (422, "media_refused")
        form = aiohttp.FormData()
        form.add_field("document", data, filename=name, content_type=mime)
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=form)
        details.append(body["detail"])
        assert (status, body["error"]) == (422, "media_refused")
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
    assert details == ["I could not read that PDF within 1.5 s; nothing was kept."] * 3
    assert not (workspace / "uploads").exists() or not [p for p in (workspace / "uploads").rglob("*") if p.is_file()]
    assert fake_llm.requests == []
