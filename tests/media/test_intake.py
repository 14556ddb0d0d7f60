"""`take_in` on its own: caps, failures and the workspace jail, with the fetch an adapter would give."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import BinaryIO

import pytest

from channels import AttachmentTooLarge, ChannelError
from orchestrator.checks import load_config
from orchestrator.media import Incoming, MediaRefused, bytes_fetch, safe_name, take_in
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from tests.conftest import WriteConfig
from tests.media.samples import JPEG, PDF

TOML = """
[providers.fake]
base_url = "http://127.0.0.1:9/v1"

[agents.a]
provider = "fake"
model = "m"
vision = true

[agents.a.media]
accept = ["image", "document"]
max_bytes = 10000
max_message_bytes = 15000
"""
DAY = date(2026, 3, 4)


@pytest.fixture
def execution(write_config: WriteConfig) -> ResolvedAgentExecution:
    config = load_config(write_config(TOML))
    return resolve(config, "a", path=ConstructionPath.GATEWAY_CHAT, services=Services())


def files(execution: ResolvedAgentExecution) -> list[str]:
    root = execution.security.workspace
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def streaming(data: bytes, calls: list[int]) -> Callable[[BinaryIO, int], object]:
    """A fetch that writes in pieces and stops past the cap, as the adapters do."""

    async def fetch(dest: BinaryIO, max_bytes: int) -> int:
        calls.append(max_bytes)
        written = 0
        for start in range(0, len(data), 1000):
            piece = data[start : start + 1000]
            written += len(piece)
            if written > max_bytes:
                raise AttachmentTooLarge("test", "over the cap")
            dest.write(piece)
        return written

    return fetch


async def test_names_are_sanitised_and_never_overwrite(execution: ResolvedAgentExecution) -> None:
    assert safe_name("../../etc/passwd", kind="document", mime="text/plain") == "passwd"
    assert safe_name("..", kind="image", mime="image/jpeg") == "image.jpg"
    assert safe_name(".bashrc", kind="document", mime="text/plain") == "bashrc"
    assert safe_name("r\u00e9sum\u00e9 <1>.pdf", kind="document", mime="application/pdf") == "r_sum_ _1_.pdf"
    assert len(safe_name("x" * 500 + ".pdf", kind="document", mime="application/pdf")) == 120
    one = Incoming(kind="document", mime="text/plain", size=2, name="../notes.txt", fetch=bytes_fetch(b"v1"))
    two = Incoming(kind="document", mime="text/plain", size=2, name="notes.txt", fetch=bytes_fetch(b"v2"))
    first = await take_in(execution.media, execution.security, [one], text="", today=DAY)
    second = await take_in(execution.media, execution.security, [two], text="", today=DAY)
    assert first.media[0]["path"] == "uploads/2026-03-04/notes.txt"
    assert second.media[0]["path"] != first.media[0]["path"] and second.media[0]["path"].endswith(".txt")
    root = execution.security.workspace
    assert (root / first.media[0]["path"]).read_bytes() == b"v1" and (root / second.media[0]["path"]).read_bytes() == b"v2"


async def test_the_message_cap_is_checked_up_front_and_while_reading(execution: ResolvedAgentExecution) -> None:
    calls: list[int] = []
    declared = [Incoming(kind="document", mime="text/plain", size=8000, name=f"{i}.txt",
                         fetch=streaming(b"x" * 8000, calls)) for i in range(2)]
    with pytest.raises(MediaRefused, match="one message may carry at most 15,000 bytes"):
        await take_in(execution.media, execution.security, declared, text="")
    assert calls == []  # refused before anything was fetched
    unknown = [Incoming(kind="document", mime="text/plain", name=f"{i}.txt", fetch=streaming(b"x" * 8000, calls))
               for i in range(2)]
    with pytest.raises(MediaRefused, match="too large: the limit is 7,000 bytes"):
        await take_in(execution.media, execution.security, unknown, text="")
    assert calls == [10000, 7000]  # the second may only take what the message has left
    assert files(execution) == []  # the first file went too: nothing is stored half-way


async def test_a_failing_or_hanging_fetch_keeps_nothing(execution: ResolvedAgentExecution) -> None:
    async def broken(dest: BinaryIO, max_bytes: int) -> int:
        dest.write(b"half")
        raise ChannelError("test", "connection reset")

    async def hanging(dest: BinaryIO, max_bytes: int) -> int:
        dest.write(b"half")
        await asyncio.Event().wait()
        return 0

    good = Incoming(kind="image", mime="image/jpeg", size=len(JPEG), fetch=bytes_fetch(JPEG))
    for fetch, message in ((broken, "could not fetch the file"), (hanging, "took too long")):
        bad = Incoming(kind="document", mime="application/pdf", fetch=fetch)
        with pytest.raises(MediaRefused, match=message):
            await take_in(execution.media, execution.security, [good, bad], text="", timeout_s=0.05)
        assert files(execution) == []


async def test_a_damaged_pdf_is_kept_and_announced_without_text(execution: ResolvedAgentExecution) -> None:
    item = Incoming(kind="document", mime="application/pdf", size=20, name="x.pdf", fetch=bytes_fetch(b"%PDF-1.4 broken"))
    intake = await take_in(execution.media, execution.security, [item], text="read", today=DAY)
    assert intake.text == "read\n\n[document attached: uploads/2026-03-04/x.pdf (application/pdf, 15 bytes); its text could not be extracted]"
    assert files(execution) == ["uploads/2026-03-04/x.pdf"]
    good = Incoming(kind="document", mime="application/pdf", size=len(PDF), name="y.pdf", fetch=bytes_fetch(PDF))
    intake = await take_in(execution.media, execution.security, [good], text="", today=DAY)
    assert intake.media[0]["text_path"] == "uploads/2026-03-04/y.pdf.txt"


async def test_what_a_killed_fetch_left_is_swept_by_the_first_intake_and_fresh_ones_kept(
    execution: ResolvedAgentExecution, tmp_path: Path
) -> None:
    root = execution.security.workspace
    day = root / "uploads" / "2026-01-01"
    day.mkdir(parents=True)
    stale_partial = day / ".partial-0000-photo.jpg"
    stale_partial.write_bytes(b"half a photo")
    stale_staging = root / "uploads" / ".incoming-abc"
    stale_staging.mkdir()
    (stale_staging / "part").write_bytes(b"half an upload")
    fresh_partial = day / ".partial-1111-doc.pdf"  # another process may be fetching it now
    fresh_partial.write_bytes(b"in flight")
    kept = day / "photo.jpg"  # a finished upload the model may read
    kept.write_bytes(b"whole")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"not ours")
    (root / "uploads" / ".incoming-link").symlink_to(outside)  # never followed
    old = time.time() - 2 * 3600
    for path in (stale_partial, stale_staging, kept):
        os.utime(path, (old, old))
    item = Incoming(kind="document", mime="text/plain", size=2, name="n.txt", fetch=bytes_fetch(b"ok"))
    await take_in(execution.media, execution.security, [item], text="", today=DAY)
    assert not stale_partial.exists() and not stale_staging.exists()
    assert fresh_partial.read_bytes() == b"in flight" and kept.read_bytes() == b"whole"
    assert (outside / "precious").read_bytes() == b"not ours"
    # once per workspace per process: a later leftover waits for the next start
    late = day / ".partial-2222-late.jpg"
    late.write_bytes(b"x")
    os.utime(late, (old, old))
    await take_in(execution.media, execution.security, [item], text="", today=DAY)
    assert late.exists()
