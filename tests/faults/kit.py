"""The fault suite's kit: the real `orchestrator run` as a child process against FakeTelegram,
and the bookkeeping of what reached the chat (answers, "interrupted" notices, copies, losses)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import provider_toml
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
NOTICE = re.compile(r'I was restarted while answering "(msg-\d+)"')


def config_text(fake_llm: FakeOpenAI, tg: FakeTelegram, *, daemon: str = "shutdown_grace_s = 20\n") -> str:
    """Return a config: one Telegram bot routed to an agent on the fake LLM."""
    return provider_toml(fake_llm.base_url) + f"""
[daemon]
{daemon}
[agents.a]
provider = "fake"
model = "m"

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


async def start(config: Path, *, log: Path | None = None, wait_ready: bool = True) -> asyncio.subprocess.Process:
    """Start `orchestrator run` (stderr to `log`, or a file beside the config); wait for READY."""
    log = log or config.with_name(f"daemon-{time.monotonic_ns()}.log")
    with open(log, "wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=sink,
            cwd=ROOT, env={**os.environ, "FAULT_TG_TOKEN": DEFAULT_TOKEN},
        )
    proc_log[proc.pid] = log
    if wait_ready:
        async with asyncio.timeout(30):
            while b"ready:" not in log.read_bytes():
                if proc.returncode is not None:
                    raise AssertionError(f"the daemon exited before ready: {log.read_text()[-2000:]}")
                await asyncio.sleep(0.05)
    return proc


proc_log: dict[int, Path] = {}  # pid -> its stderr file


def stderr_of(proc: asyncio.subprocess.Process) -> str:
    """Return what the daemon wrote to stderr so far."""
    return proc_log[proc.pid].read_text(errors="replace")


def outcome(body: str) -> str | None:
    """Which message a sent text answers ("msg-N") or notices ("notice msg-N")."""
    if body.startswith("m: "):
        return body.removeprefix("m: ")
    if match := NOTICE.search(body):
        return f"notice {match[1]}"
    return None


def outcomes(tg: FakeTelegram) -> Counter[str]:
    """How often each outcome reached the chat (what Telegram accepted)."""
    return Counter(o for o in (outcome(p["text"]) for p in tg.sent) if o is not None)


def settled(tg: FakeTelegram, sent: list[str]) -> bool:
    """Return True once every message sent got an answer or a notice."""
    seen = outcomes(tg)
    return all(seen[t] + seen[f"notice {t}"] >= 1 for t in sent)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    """What reached the chat for the messages sent."""

    messages: int
    answered: int
    noticed: int
    duplicates: int  # outcomes that reached the chat more than once
    both: int  # answered and noticed
    lost: int

    @classmethod
    def of(cls, tg: FakeTelegram, sent: list[str]) -> Tally:
        seen = outcomes(tg)
        return cls(
            messages=len(sent),
            answered=sum(1 for t in sent if seen[t]),
            noticed=sum(1 for t in sent if seen[f"notice {t}"]),
            duplicates=sum(n - 1 for n in seen.values() if n > 1),
            both=sum(1 for t in sent if seen[t] and seen[f"notice {t}"]),
            lost=sum(1 for t in sent if not seen[t] and not seen[f"notice {t}"]),
        )

    def line(self, name: str) -> str:
        """Return the counts as one line for the test output (`-s` shows it)."""
        return (f"{name}: {self.messages} messages, {self.answered} answered, {self.noticed} noticed, "
                f"{self.duplicates} duplicates, {self.both} both, {self.lost} lost")


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` at `where` (made here) for the block; unmounted after it (needs root)."""
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(where: Path) -> Path:
    """Write a file until the filesystem is full; return it."""
    filler = where / "filler"
    # Unbuffered: a buffered file would keep the last partial block and fail again on close,
    # depending on how the free space happens to align with the buffer.
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler
