"""End to end: the real `orchestrator run` process, sd_notify, SIGHUP reload and SIGTERM drain."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def config_text(fake: FakeOpenAI, tg: FakeTelegram, prompt: str = "first") -> str:
    return (
        provider_toml(fake.base_url)
        + f'[daemon]\nshutdown_grace_s = 20\n[agents.helper]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "{prompt}"\n'
        + '[channels.term]\nkind = "terminal"\nuser = "op"\n'
        + f'[channels.tg]\nkind = "telegram"\ntoken = "env:E2E_TG_TOKEN"\napi_base_url = "{tg.api_base_url}"\npoll_timeout_s = 1\n'
        + '[[routes]]\nchannel = "term"\nagent = "helper"\nsenders = ["op"]\n'
        + '[[routes]]\nchannel = "tg"\nagent = "helper"\nsenders = ["*"]\n'
    )


class Daemon:
    def __init__(self, proc: asyncio.subprocess.Process, notify: socket.socket) -> None:
        self.proc, self.notify = proc, notify
        self.stderr: list[str] = []
        self.states: list[str] = []

    async def say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def reply(self) -> str:
        assert self.proc.stdout is not None
        async with asyncio.timeout(15):
            return (await self.proc.stdout.readline()).decode().rstrip("\n")

    async def state(self, wanted: str) -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(15):
            while not any(wanted in s for s in self.states):
                self.states.append((await loop.sock_recv(self.notify, 4096)).decode())

    async def log_line(self, wanted: str) -> None:
        assert self.proc.stderr is not None
        async with asyncio.timeout(15):
            while not any(wanted in line for line in self.stderr):
                self.stderr.append((await self.proc.stderr.readline()).decode())


@asynccontextmanager
async def daemon(config: Path, tmp_path: Path) -> AsyncIterator[Daemon]:
    address = str(tmp_path / "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(address)
    notify.setblocking(False)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env={**os.environ, "NOTIFY_SOCKET": address, "E2E_TG_TOKEN": DEFAULT_TOKEN},
    )
    try:
        yield Daemon(proc, notify)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        notify.close()


async def test_run_reload_and_drain(write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        await _run_reload_and_drain(write_config, fake_llm, tg, tmp_path)


async def _run_reload_and_drain(write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, tmp_path: Path) -> None:
    path = write_config(config_text(fake_llm, tg))
    async with daemon(path, tmp_path) as d:
        await d.state("READY=1")
        fake_llm.script(text("hello op"))
        await d.say("hello")
        assert await d.reply() == "hello op"
        fake_llm.script(text("hello telegram"))
        tg.push_message(5, 5, "hi from telegram")
        await tg.wait_for(lambda: [p["text"] for p in tg.sent] == ["hello telegram"], timeout=15)

        path.write_text(config_text(fake_llm, tg) + "\n[agents.helper.budget]\nmax_tool_iteration = 1\n")
        d.proc.send_signal(signal.SIGHUP)
        await d.log_line("reload rejected, keeping the running config")
        fake_llm.script(text("still serving"))
        await d.say("are you there?")
        assert await d.reply() == "still serving"
        assert fake_llm.requests[-1]["messages"][0]["content"] == "first"

        path.write_text(config_text(fake_llm, tg, prompt="second"))
        d.proc.send_signal(signal.SIGHUP)
        await d.log_line("config reloaded")
        fake_llm.latency_s = 1.0
        fake_llm.script(text("answered while draining"))
        await d.say("slow one")
        while len(fake_llm.requests) < 4:
            await asyncio.sleep(0.01)
        d.proc.send_signal(signal.SIGTERM)
        await d.state("STOPPING=1")
        assert await d.reply() == "answered while draining"
        async with asyncio.timeout(20):
            assert await d.proc.wait() == 0
    assert fake_llm.requests[-1]["messages"][0]["content"] == "second"
