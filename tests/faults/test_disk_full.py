"""Disk full under the real `orchestrator run`: the state dir is a small tmpfs that is filled
while messages arrive. Whatever the daemon does meanwhile, once space is back (and after a
restart if it stopped) every message gets exactly one answer or one notice, none twice, no
message text lands in the log, and the log says the disk is full in one warning line. Needs root for `mount -t tmpfs` (CI and this machine run as
root). Bounded: 16 messages, about 15 s."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.conftest import WriteConfig
from tests.daemon.platforms import echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.kit import Tally, config_text, fill, settled, small_tmpfs, start, stderr_of

pytestmark = pytest.mark.slow

MESSAGES = 16


@pytest.mark.timeout(180)
async def test_a_full_disk_loses_nothing_and_answers_nothing_twice(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    fake_llm.default = echo_model
    with small_tmpfs(tmp_path / "state", "4m") as state:
        async with FakeTelegram() as tg:
            config = write_config(config_text(fake_llm, tg, daemon=f'state_dir = "{state}"\nshutdown_grace_s = 20\n'))
            sent: list[str] = []
            procs = [await start(config, log=tmp_path / "first.log")]
            for n in range(MESSAGES // 2):
                sent.append(f"msg-{n}")
                tg.push_message(100 + n % 4, 7, sent[-1])
            await tg.wait_for(lambda: settled(tg, sent), timeout=30)
            filler = fill(state)
            for n in range(MESSAGES // 2, MESSAGES):
                sent.append(f"msg-{n}")
                tg.push_message(100 + n % 4, 7, sent[-1])
            await asyncio.sleep(3.0)  # the daemon meets the full disk
            during = Tally.of(tg, sent)
            first_exit = procs[0].returncode
            filler.unlink()
            if first_exit is not None:  # it stopped: the operator frees space and starts it again
                procs.append(await start(config, log=tmp_path / "second.log"))
            try:
                await tg.wait_for(lambda: settled(tg, sent), timeout=60)
                await asyncio.sleep(1.0)  # anything sent twice would arrive now
            finally:
                procs[-1].send_signal(signal.SIGTERM)
                async with asyncio.timeout(60):
                    last_exit = await procs[-1].wait()
    tally = Tally.of(tg, sent)
    log = "".join(stderr_of(p) for p in procs)
    print(f"\ndisk full: while full {during.answered} answered; the first daemon "
          f"{'kept running' if first_exit is None else f'exited {first_exit}'}")
    print(tally.line("disk full, after space came back"))
    print("\n".join(sorted({line[24:160] for line in log.splitlines() if "ERROR" in line})))
    assert last_exit == 0
    assert first_exit in (None, 1)  # never killed by a signal
    assert (tally.lost, tally.duplicates, tally.both) == (0, 0, 0)
    # each daemon says the disk is full once (not once per message it could not store), no traceback
    for proc in procs:
        said = [line for line in stderr_of(proc).splitlines() if "WARNING" in line and "is full" in line]
        assert len(said) <= 1, said
    assert "Traceback" not in log
    # no message text in the log: not the ones met by the full disk (tracebacks), nor any other
    assert not [t for t in sent if f"{t}\n" in log or f"{t}'" in log or f'{t}"' in log or f"{t} " in log]
