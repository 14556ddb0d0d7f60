"""A PDF's text is read in a confined child: text still comes back, a costly file is stopped, the child is confined.

Through `take_in` (the intake every path calls) with the seam's resolved policy, and the
child's own confinement checked by running a probe in place of pypdf under the same launch.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from loguru import logger

from orchestrator.checks import load_config
from orchestrator.media import Incoming, MediaRefused, ParserLimits, bytes_fetch, take_in
from orchestrator.media import confined
from orchestrator.media.pdf import PdfTooCostly, extract_pdf_text
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from orchestrator.tools import bwrap_error, landlock_error
from tests.conftest import WriteConfig
from tests.media.samples import PDF, PDF_TEXT, costly_pdf, greedy_pdf

pytestmark = pytest.mark.slow

TOML = """
[providers.fake]
base_url = "http://127.0.0.1:9/v1"

[agents.a]
provider = "fake"
model = "m"

[agents.a.media]
accept = ["document"]
max_bytes = 1000000
pdf_timeout_s = 1.5
pdf_cpu_s = 60
pdf_memory_mb = 384
"""
DAY = date(2026, 3, 4)
KINDS = [kind for kind, error in (("bwrap", bwrap_error()), ("landlock", landlock_error(False))) if error is None]


@pytest.fixture
def execution(write_config: WriteConfig) -> ResolvedAgentExecution:
    config = load_config(write_config(TOML))
    return resolve(config, "a", path=ConstructionPath.GATEWAY_CHAT, services=Services())


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="INFO", format="{message}")
    yield lines
    logger.remove(sink)


def pdf(data: bytes, name: str = "report.pdf") -> Incoming:
    return Incoming(kind="document", mime="application/pdf", size=len(data), name=name, fetch=bytes_fetch(data))


def parser_pids(memory_bytes: int) -> set[int]:
    """Return the live parser children started with `memory_bytes` (their tag names it), bwrap's inner one too."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(arg.startswith(b"orchestrator-pdf-child:") and arg.endswith(b":%d" % memory_bytes)
                                for arg in argv):
            found.add(int(entry.name))
    return found


async def test_a_normal_pdf_still_yields_its_text_under_the_strongest_sandbox(
    execution: ResolvedAgentExecution,
) -> None:
    assert execution.media.pdf.sandbox == (KINDS[0] if KINDS else "none")
    assert "pdf_timeout_s:1.5" in execution.media.describe()
    intake = await take_in(execution.media, execution.security, [pdf(PDF)], text="", today=DAY)
    extract = execution.security.workspace / intake.media[0]["text_path"]
    assert PDF_TEXT in extract.read_text()


@pytest.mark.parametrize("kind", [*KINDS, "none"])
async def test_every_kind_reads_a_pdf_from_a_descriptor(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(PDF)
    limits = ParserLimits(sandbox=kind, timeout_s=30, cpu_seconds=10, memory_bytes=512 * 2**20)  # type: ignore[arg-type]
    fd = os.open(path, os.O_RDONLY)
    try:
        text = await extract_pdf_text(fd, limits)
    finally:
        os.close(fd)
    assert text is not None and PDF_TEXT in text


async def test_a_costly_pdf_is_stopped_at_its_deadline_and_nothing_is_kept(
    execution: ResolvedAgentExecution, log_lines: list[str]
) -> None:
    with pytest.raises(MediaRefused) as refused:
        await take_in(execution.media, execution.security, [pdf(costly_pdf())], text="", today=DAY)
    assert refused.value.reason == "I could not read that PDF within 1.5 s; nothing was kept."
    root = execution.security.workspace
    assert not [p for p in root.rglob("*") if p.is_file()]
    (killed,) = [line for line in log_lines if "killed at its 1.5 s deadline" in line]
    assert not Path(f"/proc/{killed.split('PDF parser ')[1].split()[0]}").exists()


async def test_the_cpu_limit_kills_a_parse_before_the_wall_clock(tmp_path: Path) -> None:
    path = tmp_path / "costly.pdf"
    path.write_bytes(costly_pdf())
    limits = ParserLimits(sandbox="none", timeout_s=300, cpu_seconds=1, memory_bytes=400 * 2**20)
    with pytest.raises(PdfTooCostly) as stopped:
        await extract_pdf_text(path, limits)
    assert stopped.value.reason == "I could not read that PDF within 1 s of CPU; nothing was kept."


async def test_the_memory_limit_stops_a_parse_that_needs_more(tmp_path: Path) -> None:
    path = tmp_path / "greedy.pdf"
    path.write_bytes(greedy_pdf())
    limits = ParserLimits(sandbox=(KINDS or ["none"])[0], timeout_s=300, cpu_seconds=60, memory_bytes=128 * 2**20)  # type: ignore[arg-type]
    with pytest.raises(PdfTooCostly) as stopped:
        await extract_pdf_text(path, limits)
    assert stopped.value.reason == "I could not read that PDF within 128 MiB of memory; nothing was kept."


async def test_cancelling_the_intake_kills_the_child(execution: ResolvedAgentExecution, log_lines: list[str]) -> None:
    memory = execution.media.pdf.memory_bytes
    task = asyncio.ensure_future(
        take_in(execution.media, execution.security, [pdf(costly_pdf(), "slow.pdf")], text="", today=DAY)
    )
    async with asyncio.timeout(30):
        while not any("reading a PDF in parser child" in line for line in log_lines):
            await asyncio.sleep(0.01)
    (started,) = [line for line in log_lines if "reading a PDF in parser child" in line]
    pid = int(started.split("parser child ")[1].split()[0])
    busy = parser_pids(memory)  # the spare was taken: these are the busy child's processes
    assert busy
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert any(f"PDF parser {pid} killed: its turn was cancelled" in line for line in log_lines)
    assert not Path(f"/proc/{pid}").exists()
    # bwrap's sandboxed child dies with bwrap (--die-with-parent): the kernel finishes it a moment later
    async with asyncio.timeout(10):
        while busy & parser_pids(memory):
            await asyncio.sleep(0.01)
    assert not [p for p in execution.security.workspace.rglob("*") if p.is_file()]


PROBE = """
import os, socket, sys
results = []
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    results.append("connected")
except OSError:
    results.append("no-network")
try:
    with open(os.path.join(sys.argv[2], "planted.txt"), "w") as handle:
        handle.write("x")
    results.append("wrote")
except OSError:
    results.append("no-write")
try:
    open(os.path.join(sys.argv[2], "secret.txt")).read()
    results.append("read")
except OSError:
    results.append("no-read")
os.write(1, " ".join(results).encode())
"""


@pytest.mark.parametrize("kind", KINDS)
async def test_the_child_reaches_no_network_and_no_workspace(tmp_path: Path, kind: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "secret.txt").write_text("the agent's file")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        # the child's own launch, with a probe where pypdf's code would run
        child = confined._spawn((kind, 5, 512 * 2**20), source=PROBE, args=(str(port), str(workspace)))  # type: ignore[arg-type]
        try:
            out, _ = await confined._read_until_eof(child.stdout, 4096)
        finally:
            child.close()
    finally:
        server.close()
    assert out.decode() == "no-network no-write no-read"
    assert sorted(p.name for p in workspace.iterdir()) == ["secret.txt"]
