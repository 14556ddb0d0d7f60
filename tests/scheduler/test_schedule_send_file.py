"""`send_file` on the schedule path: offered with a `deliver_to` chat (and posts there), absent without one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from orchestrator.scheduler import start_schedules
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.conftest import WriteConfig
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_api import FakeTelegram
from tests.media.samples import png

BOT = "444444:report-bot"
ALICE = 10


def _toml(fake_llm: FakeOpenAI, tg: FakeTelegram) -> str:
    return f"""
[providers.fake]
base_url = "{fake_llm.base_url}"
max_retries = 0

[agents.reporter]
provider = "fake"
model = "reporter-model"
autonomy = "full"
tools = ["file_read", "send_file"]

[channels.tg]
kind = "telegram"
token = "env:TG_REPORT"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[[schedules]]
name = "chart"
agent = "reporter"
cron = "0 0 1 1 *"
prompt = "Send the weekly chart."
deliver_to = {{ channel = "tg", chat = "{ALICE}" }}

[[schedules]]
name = "quiet"
agent = "reporter"
cron = "0 0 1 1 *"
prompt = "Send the weekly chart."
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_REPORT", BOT)
    async with FakeTelegram(token=BOT, username="report_bot") as fake:
        yield fake


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(15):
        while not predicate():
            await asyncio.sleep(0.02)


def _offered(request: dict[str, object]) -> list[str]:
    tools = request.get("tools") or []
    assert isinstance(tools, list)
    return [t["function"]["name"] for t in tools]


async def test_a_schedule_with_deliver_to_sends_a_file_to_that_chat(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, seen: list[ResolvedAgentExecution]
) -> None:
    async with daemon(write_config(_toml(fake_llm, tg))) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "reporter"
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "chart.png").write_bytes(png(640, 480))
        fake_llm.script(tool_call("send_file", {"path": "chart.png", "caption": "this week"}), text("chart sent"))
        runner = await start_schedules(runtime)
        runner.fire_now("chart")
        await _until(lambda: any(p["text"] == "chart sent" for p in tg.calls("sendMessage", token=BOT)))
        await _until(lambda: not runner.busy)
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.SCHEDULE and execution.media.send_file
    assert _offered(fake_llm.requests[0]) == ["file_read", "send_file"]
    (upload,) = tg.uploads
    assert (upload["method"], str(upload["chat_id"]), upload["caption"]) == ("sendPhoto", str(ALICE), "this week")
    assert upload["data"] == png(640, 480)
    result = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert result[0].startswith("sent chart.png")


async def test_a_schedule_without_deliver_to_is_not_offered_send_file(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, seen: list[ResolvedAgentExecution]
) -> None:
    async with daemon(write_config(_toml(fake_llm, tg))) as runtime:
        fake_llm.script(text("nowhere to send it"))
        runner = await start_schedules(runtime)
        runner.fire_now("quiet")
        await _until(lambda: len(seen) == 1 and not runner.busy)
    (execution,) = seen
    assert not execution.media.send_file and "send_file" not in execution.tools
    assert execution.assembly.no_chat
    assert _offered(fake_llm.requests[0]) == ["file_read"]
    assert tg.uploads == [] and tg.calls("sendMessage", token=BOT) == []
