"""A costly PDF sent to a real `orchestrator run` (fake Telegram): one line at its deadline, /stop and SIGTERM end its parse.

One daemon, two bots: `quick`'s agent reads PDFs within 2 s, `patient`'s within 300 s,
so `/stop`, then SIGTERM, arrive while a parse is under way and only they can end it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.media.samples import costly_pdf

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUICK, PATIENT = "444444:quick-bot", "555555:patient-bot"
GRACE_S = 2
# tags the patient agent's parser children in `ps`; drawn per run, so another run of this test
# on the same machine (a second copy of the suite) never has children that look like ours
PATIENT_MEMORY_MB = 448 + secrets.randbelow(256)


def config_text(fake: FakeOpenAI, tg: FakeTelegram) -> str:
    agents = "".join(
        f'[agents.{name}]\nprovider = "fake"\nmodel = "m"\n[agents.{name}.media]\naccept = ["document"]\n{limits}\n'
        f'[channels.{name}]\nkind = "telegram"\ntoken = "env:TG_{name.upper()}"\napi_base_url = "{tg.api_base_url}"\n'
        f'poll_timeout_s = 1\n[[routes]]\nchannel = "{name}"\nagent = "{name}"\nsenders = ["*"]\n'
        for name, limits in (
            ("quick", "pdf_timeout_s = 2\npdf_cpu_s = 60"),
            ("patient", f"pdf_timeout_s = 300\npdf_cpu_s = 300\npdf_memory_mb = {PATIENT_MEMORY_MB}"),
        )
    )
    return provider_toml(fake.base_url) + f"[daemon]\nshutdown_grace_s = {GRACE_S}\n" + agents


def tagged(memory_mb: int) -> set[int]:
    """Return the live processes of parser children started with `memory_mb`."""
    tag = b":%d" % (memory_mb * 2**20)
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(a.startswith(b"orchestrator-pdf-child:") and a.endswith(tag) for a in argv):
            found.add(int(entry.name))
    return found


def shown(pids: set[int]) -> list[str]:
    """Return each process's program, state and parent, for a failure's message."""
    lines = []
    for pid in sorted(pids):
        try:
            status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        lines.append(f"{pid} {program} state {status.get('State')} parent {status.get('PPid')}")
    return lines


async def test_a_costly_pdf_gets_one_line_stop_ends_its_parse_and_sigterm_ends_the_daemon_mid_parse(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    async with FakeTelegram(token=QUICK, username="quick_bot") as tg:
        tg.add_bot(PATIENT, username="patient_bot")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orchestrator.cli", "run", "--config", str(write_config(config_text(fake_llm, tg))),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            cwd=ROOT, env={**os.environ, "TG_QUICK": QUICK, "TG_PATIENT": PATIENT},
        )
        log: list[str] = []

        async def log_line(wanted: str, count: int = 1) -> None:
            assert proc.stderr is not None
            async with asyncio.timeout(60):
                while sum(wanted in line for line in log) < count:
                    line = (await proc.stderr.readline()).decode()
                    assert line, f"the daemon ended before logging {wanted!r}: {''.join(log)}"
                    log.append(line)

        # only the "reading a PDF" line names a child's limits, and only the patient one this memory
        patient_reading = f"pdf_memory_mb:{PATIENT_MEMORY_MB}"
        try:
            await log_line("ready")
            tg.push_document(7, 7, costly_pdf(), file_name="report.pdf", mime_type="application/pdf", token=QUICK)
            line = "I could not read that PDF within 2 s; nothing was kept."
            await tg.wait_for(lambda: [p["text"] for p in tg.calls("sendMessage", token=QUICK)] == [line], timeout=60)
            assert fake_llm.requests == []  # refused before any turn ran

            # /stop reaches a PDF being read: the child is killed, the sender told, nothing kept
            tg.push_document(9, 9, costly_pdf(), file_name="stopped.pdf", mime_type="application/pdf", token=PATIENT)
            await log_line(patient_reading)  # the patient child's own line: no other line counts
            stopped = tagged(PATIENT_MEMORY_MB)
            assert stopped, "".join(log)
            tg.push_message(9, 9, "/stop", token=PATIENT)
            await log_line("killed: its turn was cancelled")
            await tg.wait_for(lambda: [p["text"] for p in tg.calls("sendMessage", token=PATIENT)] == ["Stopped."],
                              timeout=30)
            async with asyncio.timeout(30):  # bwrap's sandboxed child dies with bwrap a moment later
                while stopped & tagged(PATIENT_MEMORY_MB):
                    await asyncio.sleep(0.01)

            tg.push_document(8, 8, costly_pdf(), file_name="slow.pdf", mime_type="application/pdf", token=PATIENT)
            await log_line(patient_reading, count=2)
            busy = tagged(PATIENT_MEMORY_MB)
            assert busy
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(GRACE_S + 20):  # generous for a loaded host; without the fix it never ends
                assert await proc.wait() == 0
            # the parser goes with the daemon (bwrap's sandboxed child a moment after bwrap), spares too
            try:
                async with asyncio.timeout(30):
                    while tagged(PATIENT_MEMORY_MB):
                        await asyncio.sleep(0.01)
            except TimeoutError:
                raise AssertionError(f"parser processes outlived the daemon: {shown(tagged(PATIENT_MEMORY_MB))}") from None
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
