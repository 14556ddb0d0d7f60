"""`workspace_max_bytes`: the daemon's own writes (uploads, PDF extracts, gateway staging, file_write) stop at the limit, with one line."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from orchestrator.checks import load_config
from orchestrator.errors import ToolFailure
from orchestrator.gateway.multipart import staged_form
from orchestrator.media import Incoming, MediaRefused, bytes_fetch, take_in
from orchestrator.policy import SecurityPolicy
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from orchestrator.tools import BUILTIN_TOOLS
from tests.conftest import WriteConfig
from tests.fakes.loopback import serving
from tests.media.samples import PDF

TOML = """
[providers.fake]
base_url = "http://127.0.0.1:9/v1"

[agents.a]
provider = "fake"
model = "m"

[agents.a.media]
accept = ["document"]
max_bytes = 100000
"""
DAY = date(2026, 3, 4)
FULL = "I could not store that file: the agent's workspace is full."


@pytest.fixture
def execution(write_config: WriteConfig) -> ResolvedAgentExecution:
    return resolve(load_config(write_config(TOML)), "a", path=ConstructionPath.GATEWAY_CHAT, services=Services())


def limited(execution: ResolvedAgentExecution, limit: int) -> SecurityPolicy:
    return dataclasses.replace(execution.security, workspace_max_bytes=limit)


def stored(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


async def test_uploads_stop_at_the_workspace_limit_and_keep_nothing(execution: ResolvedAgentExecution) -> None:
    root = execution.security.workspace
    (root / "notes").mkdir()
    (root / "notes" / "big").write_bytes(b"n" * 40_000)  # a command's writes count too
    security = limited(execution, 60_000)
    fits = Incoming(kind="document", mime="text/plain", size=8000, name="a.txt", fetch=bytes_fetch(b"a" * 8000))
    await take_in(execution.media, security, [fits], text="", today=DAY)
    # past the limit while reading (the size was not declared): refused, the partial file removed
    over = Incoming(kind="document", mime="text/plain", name="b.txt", fetch=bytes_fetch(b"b" * 30_000))
    with pytest.raises(MediaRefused) as caught:
        await take_in(execution.media, security, [over], text="", today=DAY)
    assert caught.value.reason == FULL
    assert stored(root) == ["notes/big", "uploads/2026-03-04/a.txt"]


async def test_a_pdf_extract_past_the_limit_refuses_the_message(execution: ResolvedAgentExecution) -> None:
    root = execution.security.workspace
    security = limited(execution, len(PDF) + 1)  # the PDF fits, its text does not
    item = Incoming(kind="document", mime="application/pdf", size=len(PDF), name="r.pdf", fetch=bytes_fetch(PDF))
    with pytest.raises(MediaRefused) as caught:
        await take_in(execution.media, security, [item], text="", today=DAY)
    assert caught.value.reason == FULL
    assert stored(root) == []


async def test_file_write_is_refused_past_the_limit_with_one_line(execution: ResolvedAgentExecution) -> None:
    write = BUILTIN_TOOLS["file_write"].bind(limited(execution, 20_000))
    await write.invoke({"path": "a.txt", "content": "x" * 8000})
    await write.invoke({"path": "a.txt", "content": "y" * 9000})  # a replacement counts what it adds
    with pytest.raises(ToolFailure) as caught:
        await write.invoke({"path": "b.txt", "content": "z" * 15_000})
    assert caught.value.reason.startswith("refused: 'b.txt' was not written: the workspace is full (")
    assert "\n" not in caught.value.reason
    assert stored(execution.security.workspace) == ["a.txt"]


async def test_gateway_staging_stops_at_the_room_the_limit_leaves(execution: ResolvedAgentExecution) -> None:
    root = execution.security.workspace
    security = limited(execution, 30_000)
    seen: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        try:
            async with staged_form(request, execution.media, security, max_field_bytes=1000) as form:
                seen.append(len(form.items))
                return web.json_response({"staged": len(form.items)})
        except MediaRefused as exc:
            return web.json_response({"refused": exc.reason}, status=422)

    app = web.Application()
    app.router.add_post("/", handler)
    async with serving(app) as origin, aiohttp.ClientSession() as session:
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("document", b"a" * 20_000, filename="a.txt", content_type="text/plain")
        form.add_field("document", b"b" * 20_000, filename="b.txt", content_type="text/plain")
        async with session.post(origin, data=form) as response:
            assert (response.status, await response.json()) == (422, {"refused": FULL})
    assert seen == [] and stored(root) == []  # the first part fitted, the second passed the room: nothing kept
