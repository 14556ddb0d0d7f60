"""Schedules driven by the real APScheduler inside a real Runtime, against the fake LLM."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from loguru import logger

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, reload_config
from orchestrator.errors import ConfigError
from orchestrator.policy import Interactivity
from orchestrator.scheduler import SCHEDULE_DB, ScheduleRunner, start_schedules
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from orchestrator.store import ScheduleLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call

AGENT = """
[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "You are ops."
autonomy = "supervised"
tools = ["file_read", "list_dir", "shell"]

[agents.ops.shell]
allowed_commands = ["echo"]
"""


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING", format="{message}")
    yield lines
    logger.remove(sink)


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_fired_run_is_narrowed_non_interactive_and_delivered(
    fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution]
) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT + """
[channels.term]
kind = "terminal"

[[schedules]]
name = "daily"
agent = "ops"
cron = "0 0 1 1 *"
timezone = "UTC"
prompt = "Write the daily report."
tools = ["list_dir", "file_read", "http_fetch"]
deliver_to = { channel = "term", chat = "terminal" }
"""
    )
    # list_dir needs approval (supervised); a schedule has no operator, so it must be denied
    fake_llm.script(tool_call("list_dir", {"path": "."}), text("report: all quiet"))
    async with running(path) as (runtime, terms):
        runner = await start_schedules(runtime)
        assert runtime.component(ScheduleRunner) is runner
        next_run = runner.next_run("daily")
        assert next_run is not None and (next_run.month, next_run.day, next_run.hour) == (1, 1, 0)
        runner.fire_now("daily")  # through the scheduler's own job, not a direct call
        await terms["term"].screen.wait_for(lambda lines: "report: all quiet" in lines)
        sessions = list(runtime.store.sessions())
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.SCHEDULE
    assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    assert execution.assembly.caller_allowed == frozenset({"list_dir", "file_read", "http_fetch"})
    # narrowing only: shell is gone, http_fetch (not granted) was not added
    assert execution.tools.names == ("file_read", "list_dir")
    first, second = fake_llm.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["file_read", "list_dir"]
    assert first["messages"][:2] == [
        {"role": "system", "content": "You are ops."},
        {"role": "user", "content": "Write the daily report."},
    ]
    denial = second["messages"][-1]
    assert denial["role"] == "tool" and "no operator decided" in denial["content"]
    assert ("schedule:daily", "ops", 4) in sessions  # the transcript is persisted per schedule


async def test_interval_schedule_fires_repeatedly_and_records_runs(write_config: WriteConfig) -> None:
    async with FakeOpenAI(default=text("tick")) as fake:
        path = write_config(
            provider_toml(fake.base_url) + AGENT
            + '[[schedules]]\nname = "tick"\nagent = "ops"\ninterval_s = 0.2\nprompt = "tick?"\n'
        )
        async with running(path) as (runtime, _):
            await start_schedules(runtime)
            await _until(lambda: len(fake.requests) >= 2)
            await _until(lambda: runtime.inflight == 0)
        # without `tools` there is no narrowing: the agent's whole grant is sent
        assert [t["function"]["name"] for t in fake.requests[0]["tools"]] == ["file_read", "list_dir", "shell"]
        with ScheduleLog(load_config(path).state_path() / SCHEDULE_DB) as log:
            record = log.get("tick")
        assert record is not None and record.last_run is not None
        assert record.last_status == "completed"


async def test_a_daemon_without_schedules_starts_the_scheduler_when_a_reload_adds_one(
    write_config: WriteConfig,
) -> None:
    async with FakeOpenAI(default=text("tick")) as fake:
        path = write_config(provider_toml(fake.base_url) + AGENT)
        async with running(path) as (runtime, _):
            assert runtime.component(ScheduleRunner) is None  # nothing to schedule: no scheduler at all
            write_config(
                provider_toml(fake.base_url) + AGENT
                + '[[schedules]]\nname = "tick"\nagent = "ops"\ninterval_s = 0.2\nprompt = "tick?"\n'
            )
            assert await reload_config(runtime, path)
            assert runtime.component(ScheduleRunner) is not None
            await _until(lambda: len(fake.requests) >= 1)
            await _until(lambda: runtime.inflight == 0)
        assert fake.requests[0]["messages"][-1] == {"role": "user", "content": "tick?"}


async def test_a_failing_run_is_logged_and_the_next_run_still_happens(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT + """
[channels.term]
kind = "terminal"

[[schedules]]
name = "report"
agent = "ops"
cron = "0 0 1 1 *"
prompt = "report"
deliver_to = { channel = "term", chat = "terminal" }
"""
    )
    fake_llm.script(status(500), text("second run fine"))
    async with running(path) as (runtime, terms):
        runner = await start_schedules(runtime)
        runner.fire_now("report")
        # delivered to a chat: the generic line, never the provider's URL or error body
        lines = await terms["term"].screen.wait_for(lambda ls: any("the model provider failed (incident" in x for x in ls))
        assert not any("fake error 500" in x or fake_llm.base_url in x for x in lines)
        with ScheduleLog(runtime.config.state_path() / SCHEDULE_DB) as log:
            await _until(lambda: (log.get("report") or _never()).last_status == "provider_error")
        runner.fire_now("report")
        await terms["term"].screen.wait_for(lambda lines: "second run fine" in lines)
    assert len(fake_llm.requests) == 2


def _never() -> object:
    raise AssertionError("no record")


async def test_missed_runs_across_a_restart_follow_the_misfire_policy(
    fake_llm: FakeOpenAI, write_config: WriteConfig, warnings: list[str]
) -> None:
    hour = 3600.0
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT
        + '[[schedules]]\nname = "hourly"\nagent = "ops"\ninterval_s = 3600\nprompt = "p"\nmisfire_grace_s = 60\n'
    )
    config = load_config(path)
    t0 = time.time()

    async def daemon_at(now: float) -> None:
        # one daemon lifetime whose clock reads `now`; the state dir persists in between
        async with Runtime.open(config, config_path=path) as runtime:
            runner = await runtime.enter_async_context(ScheduleRunner(runtime, clock=lambda: now))
            await _until(lambda: not runner.busy)

    await daemon_at(t0)  # first sight: registered, nothing missed
    assert fake_llm.requests == []
    # down for three fire times; the latest (t0 + 3h) was 10 s before the restart: ONE run
    fake_llm.script(text("caught up"))
    t1 = t0 + 3 * hour + 10
    await daemon_at(t1)
    assert len(fake_llm.requests) == 1
    with ScheduleLog(config.state_path() / SCHEDULE_DB) as log:
        record = log.get("hourly")
    assert record is not None and (record.last_run, record.last_status) == (t1, "completed")
    # down again past the next fire time (t1 + 1h) by 120 s > misfire_grace_s: skipped, logged
    await daemon_at(t1 + hour + 120)
    assert len(fake_llm.requests) == 1
    assert any("hourly" in w and "skipped" in w for w in warnings)
    # and a clean stop marks everything up to then as accounted for: no double catch-up
    await daemon_at(t1 + hour + 121)
    assert len(fake_llm.requests) == 1


async def test_a_wall_clock_set_back_moves_the_next_runs_with_it(
    fake_llm: FakeOpenAI, write_config: WriteConfig, warnings: list[str]
) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT
        + '[[schedules]]\nname = "tick"\nagent = "ops"\ninterval_s = 1\nprompt = "tick?"\n'
        + '[[schedules]]\nname = "minutely"\nagent = "ops"\ncron = "* * * * *"\ntimezone = "UTC"\nprompt = "m"\n'
    )
    config = load_config(path)
    ahead = [25 * 3600.0]  # the wall clock starts a day and an hour ahead, then is set right

    def wall() -> float:
        return time.time() + ahead[0]

    fake_llm.script(text("tocked"))
    async with Runtime.open(config, config_path=path) as runtime:
        runner = await runtime.enter_async_context(ScheduleRunner(runtime, clock=wall, clock_check_s=0.05))
        stalled = runner.next_run("tick")
        assert stalled is not None and stalled.timestamp() > time.time() + 24 * 3600  # what a step back leaves
        ahead[0] = 0.0
        await _until(lambda: any("wall clock moved back" in w for w in warnings))
        tick, minutely = runner.next_run("tick"), runner.next_run("minutely")
        assert tick is not None and tick.timestamp() <= time.time() + 1.5  # the second it had left
        assert minutely is not None and minutely.timestamp() <= time.time() + 61
        await _until(lambda: len(fake_llm.requests) >= 1)
        await _until(lambda: not runner.busy)
    assert fake_llm.requests[0]["messages"][-1] == {"role": "user", "content": "tick?"}


async def test_a_run_recorded_while_the_clock_was_ahead_does_not_hold_the_schedule_after_a_restart(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT
        + '[[schedules]]\nname = "hourly"\nagent = "ops"\ninterval_s = 3600\nprompt = "p"\n'
    )
    config = load_config(path)
    fake_llm.script(text("ran ahead"))
    ahead = time.time() + 25 * 3600.0
    async with Runtime.open(config, config_path=path) as runtime:
        runner = await runtime.enter_async_context(ScheduleRunner(runtime, clock=lambda: ahead))
        runner.fire_now("hourly")
        await _until(lambda: len(fake_llm.requests) == 1)
        await _until(lambda: not runner.busy)
    async with Runtime.open(config, config_path=path) as runtime:  # the clock set right, then a restart
        runner = await runtime.enter_async_context(ScheduleRunner(runtime))
        upcoming = runner.next_run("hourly")
    assert upcoming is not None and upcoming.timestamp() <= time.time() + 3600


def test_schedules_command_lists_next_run_times(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(
        provider_toml("http://127.0.0.1:9/v1") + AGENT + """
[channels.term]
kind = "terminal"

[[schedules]]
name = "new-year"
agent = "ops"
cron = "0 0 1 1 *"
timezone = "UTC"
prompt = "p"
deliver_to = { channel = "term", chat = "terminal" }

[[schedules]]
name = "every-5m"
agent = "ops"
interval_s = 300
prompt = "p"
"""
    )
    before = datetime.now(timezone.utc)
    assert cli.main(["schedules", "--json", "--config", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["agent"], r["trigger"], r["deliver_to"]) for r in rows] == [
        ("new-year", "ops", "cron '0 0 1 1 *' (UTC)", "term:terminal"),
        ("every-5m", "ops", "every 300s", None),
    ]
    new_year = datetime.fromisoformat(rows[0]["next_run"]).astimezone(timezone.utc)
    assert new_year == datetime(before.year + 1, 1, 1, tzinfo=timezone.utc)
    in_5m = datetime.fromisoformat(rows[1]["next_run"])
    assert before + timedelta(seconds=298) <= in_5m <= before + timedelta(seconds=302)
    assert rows[0]["last_run"] is None
    assert not (load_config(path).state_path() / SCHEDULE_DB).exists()  # listing creates no state
    assert cli.main(["schedules", "--config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("new-year  agent ops  cron '0 0 1 1 *' (UTC)  next ")
    assert out[0].endswith("-> term:terminal")


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ('name = "a"\nagent = "ops"\nprompt = "p"\n',
         "schedules[0].cron: give exactly one of cron or interval_s (neither is set)"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ncron = "* * * * *"\ninterval_s = 5\n',
         "schedules[0].interval_s: give exactly one of cron or interval_s (both are set)"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ncron = "61 * * * *"\n',
         "schedules[0].cron: invalid crontab '61 * * * *': Error validating expression '61': "
         "the last value (61) is higher than the maximum value (59)"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ncron = "0 9 * * 1-5"\n',
         "schedules[0].cron: invalid crontab '0 9 * * 1-5': write the day of week as names "
         "(mon-fri, sun), not numbers"),
        ('name = "a"\nagent = "opz"\nprompt = "p"\ninterval_s = 5\n',
         "schedules[0].agent: unknown agent 'opz' (did you mean 'ops'?)"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ninterval_s = 5\ndeliver_to = { channel = "tg", chat = "1" }\n',
         "schedules[0].deliver_to.channel: unknown channel 'tg'"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ncron = "0 9 * * *"\ntimezone = "Mars/Base"\n',
         "schedules[0].timezone: unknown time zone 'Mars/Base' (use an IANA name such as "
         "'Europe/Berlin' or 'UTC')"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ninterval_s = 5\ntimezone = "UTC"\n',
         "schedules[0].timezone: only applies to cron schedules"),
        ('name = "a"\nagent = "ops"\nprompt = "p"\ninterval_s = 5\ncommand = "x"\n',
         "schedules[0].command: unknown key 'command'"),
    ],
)
def test_config_errors_are_one_line_naming_the_key(
    write_config: WriteConfig, schedule: str, expected: str
) -> None:
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + "[[schedules]]\n" + schedule)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [f"{path}: {expected}"]


def test_duplicate_schedule_names_are_an_error(write_config: WriteConfig) -> None:
    entry = '[[schedules]]\nname = "a"\nagent = "ops"\nprompt = "p"\ninterval_s = 5\n'
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + entry + entry)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [
        f"{path}: schedules[1].name: duplicate schedule name 'a' (also schedules[0])"
    ]


SOP = """
[sops.nightly]
agent = "ops"

[[sops.nightly.steps]]
prompt = "Check the disks."
tools = ["list_dir"]
"""


async def test_sop_schedule_runs_the_sop_non_interactively_and_delivers(
    fake_llm: FakeOpenAI, write_config: WriteConfig, seen: list[ResolvedAgentExecution]
) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url) + AGENT + SOP + """
[channels.term]
kind = "terminal"

[[schedules]]
name = "nightly-sop"
sop = "nightly"
cron = "0 3 * * *"
deliver_to = { channel = "term", chat = "terminal" }
"""
    )
    fake_llm.script(text("disks fine"))
    async with running(path) as (runtime, terms):
        runner = await start_schedules(runtime)
        runner.fire_now("nightly-sop")
        await terms["term"].screen.wait_for(lambda lines: "disks fine" in lines)
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.SOP_STEP
    assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    assert execution.tools.names == ("list_dir",)
    assert [t["function"]["name"] for t in fake_llm.requests[0]["tools"]] == ["list_dir"]


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ('name = "a"\nsop = "nightly"\nprompt = "p"\ninterval_s = 5\n',
         ["schedules[0].sop: give exactly one of prompt or sop (both are set)"]),
        ('name = "a"\nsop = "nightly"\nagent = "ops"\ntools = ["x"]\ninterval_s = 5\n',
         ["schedules[0].agent: an SOP schedule runs as the SOP's own agents: remove agent",
          "schedules[0].tools: an SOP schedule takes each step's own tools: remove tools"]),
        ('name = "a"\nsop = "nightlly"\ninterval_s = 5\n',
         ["schedules[0].sop: unknown SOP 'nightlly' (did you mean 'nightly'?)"]),
        ('name = "a"\nagent = "ops"\ninterval_s = 5\n',
         ["schedules[0].prompt: give exactly one of prompt or sop (neither is set)"]),
        ('name = "a"\nprompt = "p"\ninterval_s = 5\n',
         ["schedules[0].agent: missing required key (a prompt schedule names its agent)"]),
    ],
)
def test_sop_or_prompt_config_errors(write_config: WriteConfig, schedule: str, expected: list[str]) -> None:
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + SOP + "[[schedules]]\n" + schedule)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [f"{path}: {line}" for line in expected]
