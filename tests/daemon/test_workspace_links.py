"""Links planted in a workspace under the real `orchestrator run`: the daemon writes through none.

A sandboxed command can create any link inside its workspace. Before a sender's upload, the
test plants what such a command would: the PDF extract's name as a link to a file outside
(`report.pdf.txt -> authorized_keys`), as a dangling link (the daemon would create the file
outside), as a link to a folder outside, as a hard link to a file outside, and the upload's
own name as a link. Each upload is then sent through FakeTelegram to one daemon process; the
files outside stay byte for byte as they were, nothing new appears there, and the sender
gets the agent's answer about the file, stored under a fresh name.
"""

from __future__ import annotations

import re
import signal
from datetime import date
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import start
from tests.media.samples import PDF, PDF_TEXT

pytestmark = pytest.mark.slow

ALICE = 10


def config(fake_llm: FakeOpenAI, tg: FakeTelegram, workspace: Path) -> str:
    return provider_toml(fake_llm.base_url) + f"""
[agents.a]
provider = "fake"
model = "m"
autonomy = "full"
workspace = "{workspace}"

[agents.a.media]
accept = ["document"]

[channels.tg]
kind = "telegram"
token = "env:FAULT_TG_TOKEN"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1
format = "plain"

[[routes]]
channel = "tg"
agent = "a"
senders = ["*"]
"""


def snapshot(where: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(where)): (p.read_bytes() if p.is_file() else None) for p in sorted(where.rglob("*"))}


def told(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list)
    return str([m for m in messages if m["role"] == "user"][-1]["content"])


@pytest.mark.timeout(120)
async def test_links_planted_in_the_uploads_folder_are_never_written_through(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    outside = tmp_path / "home-svc"
    (outside / ".ssh").mkdir(parents=True)
    (outside / ".ssh" / "authorized_keys").write_bytes(b"ssh-ed25519 AAAA admin@host\n")
    (outside / "victim.pdf").write_bytes(b"another agent's file\n")
    (outside / "hard-victim").write_bytes(b"beside config.toml\n")
    (outside / "folder").mkdir()
    before = snapshot(outside)
    workspace = tmp_path / "ws"
    day = workspace / "uploads" / date.today().isoformat()
    day.mkdir(parents=True)
    (day / "report.pdf.txt").symlink_to(outside / ".ssh" / "authorized_keys")
    (day / "dangling.pdf.txt").symlink_to(outside / "created-by-the-daemon")
    (day / "folder.pdf.txt").symlink_to(outside / "folder", target_is_directory=True)
    (day / "hard.pdf.txt").hardlink_to(outside / "hard-victim")
    (day / "named.pdf").symlink_to(outside / "victim.pdf")
    names = ["report.pdf", "dangling.pdf", "folder.pdf", "hard.pdf", "named.pdf"]
    fake_llm.default = lambda request: text("read it: " + ",".join(re.findall(r"is in (uploads/\S+\.txt)", told(request))))
    async with FakeTelegram() as tg:
        proc = await start(write_config(config(fake_llm, tg, workspace)))
        try:
            for count, name in enumerate(names, 1):
                tg.push_document(ALICE, ALICE, PDF, file_name=name, mime_type="application/pdf")
                await tg.wait_for(lambda: len(tg.calls("sendMessage")) == count, timeout=30)  # noqa: B023
        finally:
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
        replies = [call["text"] for call in tg.calls("sendMessage")]
    assert snapshot(outside) == before  # not a byte written, nothing created, outside
    assert len(replies) == len(names)
    for name, reply in zip(names, replies, strict=True):
        stem = name.removesuffix(".pdf")
        (extract,) = re.findall(r"uploads/\S+\.txt", reply)  # the sender got the agent's answer about its text
        assert re.fullmatch(rf"uploads/{day.name}/{stem}-[0-9a-f]{{6}}\.pdf\.txt", extract), extract
        stored = workspace / extract
        assert not stored.is_symlink() and PDF_TEXT in stored.read_text(encoding="utf-8")
        assert (workspace / extract.removesuffix(".txt")).read_bytes() == PDF
    # what was planted is still there, untouched: the daemon wrote beside it
    assert (day / "report.pdf.txt").is_symlink() and (day / "named.pdf").is_symlink()
