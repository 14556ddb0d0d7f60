"""Measure the daemon's channel path under load: 1,000 sessions over Telegram, Slack and Discord.

Run from the repository root::

    .venv/bin/python bench/channel_throughput.py [--turns N] [--sessions S] [--paced-rate R]

Two processes, loopback only (127.0.0.1):

- This process is the daemon side and nothing else: `Runtime.open`, `start_channels`, the real
  adapters (python-telegram-bot, slack-bolt Socket Mode, discord.py gateway), `deliver` and
  `process_message`, the SQLite session store and audit log, and an in-process zero-latency
  provider (it answers `re: <message>` at once), so the daemon, not the LLM, is measured. Its
  RSS is read from its own /proc/self/status: the fakes are not in that figure.
- A child process (bench/channel_platforms.py) runs FakeTelegram, FakeSlack and FakeDiscord
  and drives the sessions. It stamps a message when the fake hands it to the daemon (queued
  for getUpdates, written to the Socket Mode websocket, dispatched on the gateway) and its
  reply when the fake's handler receives the sendMessage / chat.postMessage / POST messages
  call, both on the child's clock. Latency is that difference as is: it includes the fake's
  own work on both ends and the loopback hops, so the daemon alone adds less.

Phases (each session is one chat with one user; replies are checked against their message):

1. warm-up: every session exchanges `--warmup` messages (closed loop per session). The default,
   20, fills each session's history window (the default max_history_messages = 40), so memory
   growth after it is not the bounded transcript cache filling up.
2. saturation: every session keeps exactly one message outstanding until `--turns` replies
   arrived: the sustained turns/s. Latency here is queueing (Little's law: sessions / rate).
3. paced: open-loop arrivals at `--paced-rate` turns/s, round-robin over the sessions, for
   `--paced-seconds`: the added latency at a load the daemon sustains.

RSS is sampled after the channels are ready, after warm-up and at every tenth of each phase.
CPU used by other processes on the machine during each phase is printed too: figures taken
while something else competes for the two CPUs are not comparable. Targets are printed beside
the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for bench.* when run as `python bench/channel_throughput.py`

from bench.channel_platforms import PLATFORMS  # noqa: E402

_PLATFORMS_SIDE: Final = Path(__file__).resolve().with_name("channel_platforms.py")

DEFAULT_TURNS: Final = 20_000
DEFAULT_SESSIONS: Final = 1_000
DEFAULT_WARMUP: Final = 20  # messages per session: fills the default 40-message history window
DEFAULT_PACED_RATE: Final = 500.0
DEFAULT_PACED_SECONDS: Final = 10.0
PACED_MAX_LOAD: Final = 0.7  # never pace above this share of the measured capacity
AGENT: Final = "bench"
TARGET_RATE: Final = 500.0
TARGET_P99_S: Final = 0.020
TARGET_RSS_MIB: Final = 150.0
FLAT_MIB: Final = 5.0  # growth from warm-up to the end that still reads as flat

TG_TOKEN_ENV: Final = "BENCH_TG_TOKEN"
SLACK_BOT_ENV: Final = "BENCH_SLACK_BOT_TOKEN"
SLACK_APP_ENV: Final = "BENCH_SLACK_APP_TOKEN"
DISCORD_TOKEN_ENV: Final = "BENCH_DISCORD_TOKEN"

CONFIG_TOML: Final = """\
[daemon]
state_dir = "{state_dir}"

[providers.inprocess]
base_url = "http://127.0.0.1:9/v1"  # never contacted: the provider is injected in-process

[agents.{agent}]
provider = "inprocess"
model = "zero-latency"
system_prompt = "You are a benchmark agent."
autonomy = "full"

[channels.tg]
kind = "telegram"
token = "env:{tg_env}"
api_base_url = "{tg_url}"

[channels.slack]
kind = "slack"
bot_token = "env:{slack_bot_env}"
app_token = "env:{slack_app_env}"
api_base_url = "{slack_url}"

[channels.discord]
kind = "discord"
token = "env:{discord_env}"
api_base_url = "{discord_url}"
gateway_url = "{discord_gateway}"

[[routes]]
channel = "tg"
agent = "{agent}"
senders = ["*"]

[[routes]]
channel = "slack"
agent = "{agent}"
senders = ["*"]

[[routes]]
channel = "discord"
agent = "{agent}"
senders = ["*"]
"""


# ================================================================ parent: the daemon side


def machine_busy_s() -> float:
    """Return the CPU seconds all processes have used since boot (/proc/stat, not idle or iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(x) for x in stat.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def rss_mib(key: str = "VmRSS") -> float:
    """Return this process's VmRSS (or another /proc/self/status size, e.g. VmHWM) in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} line")


@dataclass(slots=True)
class PhaseResult:
    name: str
    fake: dict[str, Any]
    daemon_cpu_s: float
    others_cpu_s: float  # CPU the rest of the machine used meanwhile
    ticks: list[tuple[int, float, float]]  # (answered, seconds into the phase, RSS MiB), last = the end


class Child:
    """The platforms process and its line protocol."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the platforms process exited (code {await self.proc.wait()})")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    async def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        await self.proc.stdin.drain()

    async def phase(self, name: str, mode: str, turns: int, *, rate: float = 0.0, quota: int = 0) -> PhaseResult:
        print(f"  {name}: {turns:,} turns ({mode}{f', {rate:.0f}/s' if rate else ''}) ...", flush=True)
        cpu0, busy0 = time.process_time(), machine_busy_s()
        await self.send(cmd="run", phase=name, mode=mode, turns=turns, rate=rate, quota=quota)
        ticks: list[tuple[int, float, float]] = []
        while (event := await self.event())["event"] == "tick":
            ticks.append((event["answered"], event["elapsed"], rss_mib()))
        cpu, busy = time.process_time() - cpu0, machine_busy_s() - busy0
        ticks.append((event["answered"], event["wall_s"], rss_mib()))
        others = max(0.0, busy - cpu - event["fake_cpu_s"])
        return PhaseResult(name=name, fake=event, daemon_cpu_s=cpu, others_cpu_s=others, ticks=ticks)


def write_config(folder: Path, listening: Mapping[str, Any]) -> Path:
    """Write the config for the child's fakes; the tokens go into this process's environment."""
    tg, slack, dc = listening["telegram"], listening["slack"], listening["discord"]
    os.environ |= {TG_TOKEN_ENV: tg["token"], SLACK_BOT_ENV: slack["bot_token"],
                   SLACK_APP_ENV: slack["app_token"], DISCORD_TOKEN_ENV: dc["token"]}
    path = folder / "config.toml"
    text = CONFIG_TOML.format(
        state_dir=folder / "state", agent=AGENT, tg_env=TG_TOKEN_ENV, tg_url=tg["url"],
        slack_bot_env=SLACK_BOT_ENV, slack_app_env=SLACK_APP_ENV, slack_url=slack["url"],
        discord_env=DISCORD_TOKEN_ENV, discord_url=dc["url"], discord_gateway=dc["gateway"],
    )
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(slots=True)
class RunFigures:
    sessions: Mapping[str, int]
    ready_s: float
    rss_ready: float
    warmup: PhaseResult
    saturated: PhaseResult
    paced: PhaseResult
    paced_rate: float
    tasks_ready: int
    tasks_end: int
    leftovers: Mapping[str, int]
    rss_hwm: float
    elapsed_s: float
    turn_log_lines: int


async def daemon_main(args: argparse.Namespace) -> RunFigures:
    """The parent process: the daemon's runtime and channels against the child's fakes."""
    from loguru import logger

    from orchestrator.checks import load_config
    from orchestrator.daemon import Runtime, start_channels
    from orchestrator.logs import configure_logging
    from orchestrator.providers import ProviderPool
    from orchestrator.seam import Services
    from orchestrator.store import AuditLog

    from bench.fake_provider import FakeProvider, echo

    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(_PLATFORMS_SIDE), "--sessions", str(args.sessions),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=_ROOT,
    )
    child = Child(proc)
    try:
        listening = await child.event()
        with tempfile.TemporaryDirectory(prefix="channel-throughput-") as tmp:
            path = write_config(Path(tmp), listening)
            config = load_config(path)
            # the daemon's own log level (INFO: a line per turn), written to a file as journald
            # would take it, so its cost is in the figures but not on this terminal
            log = Path(tmp) / "daemon.log"
            provider = FakeProvider(echo)  # answers `re: <message>` at once
            state = config.state_path()
            with AuditLog(state / "audit.sqlite3") as audit, log.open("w", encoding="utf-8") as sink:
                configure_logging(level=config.daemon.log_level, fmt=config.daemon.log_format, sink=sink)
                services = Services(audit=audit, providers=ProviderPool(factory=provider.factory))
                async with Runtime.open(config, config_path=path, services=services) as runtime:
                    t0 = time.perf_counter()
                    await start_channels(runtime, ready_timeout_s=30)
                    ready_s = time.perf_counter() - t0
                    down = [n for n, st in runtime.channels.status().items() if not st.ready]
                    if down:
                        raise SystemExit(f"channels not ready: {', '.join(down)}")
                    rss_ready, tasks_ready = rss_mib(), len(asyncio.all_tasks())
                    print(f"channels ready in {ready_s:.2f} s; RSS {rss_ready:.1f} MiB", flush=True)
                    warmup = await child.phase("warm-up", "closed", args.warmup * args.sessions, quota=args.warmup)
                    saturated = await child.phase("saturated", "closed", args.turns)
                    capacity = saturated.fake["answered"] / saturated.fake["wall_s"]
                    rate = min(args.paced_rate, PACED_MAX_LOAD * capacity)
                    paced = await child.phase("paced", "open", round(rate * args.paced_seconds), rate=rate)
                    await asyncio.sleep(0.2)  # let the last sends' tasks finish
                    tasks_end = len(asyncio.all_tasks())
                    leftovers = {
                        "runtime.sessions": len(runtime.sessions),
                        "runtime.approvals": len(runtime.approvals),
                        "runtime.inflight": runtime.inflight,
                        # the channels' supervisors are spawned tasks too, so they are left out
                        "runtime tasks (not channels)": runtime.task_count() - len(runtime.channels),
                        "runtime.transcripts (cached)": len(runtime.transcripts.cached()),
                    }
                    hwm = rss_mib("VmHWM")
                logger.remove()  # before its file closes
                turn_lines = sum(1 for line in log.open(encoding="utf-8") if " turn " in line)
        await child.send(cmd="quit")
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return RunFigures(
        sessions=listening["sessions"], ready_s=ready_s, rss_ready=rss_ready, warmup=warmup,
        saturated=saturated, paced=paced, paced_rate=rate, tasks_ready=tasks_ready, tasks_end=tasks_end,
        leftovers=leftovers, rss_hwm=hwm, elapsed_s=time.perf_counter() - started, turn_log_lines=turn_lines,
    )


# ----------------------------------------------------------------------------------- report


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def _per_turn(requests: Mapping[str, Mapping[str, int]], answered: Mapping[str, int]) -> str:
    parts = []
    for name in PLATFORMS:
        count = max(1, answered[name])
        shown = ", ".join(f"{m} {n / count:.2f}" for m, n in sorted(requests[name].items()))
        parts.append(f"{name}: {shown}")
    return "; ".join(parts)


def report(f: RunFigures, args: argparse.Namespace) -> None:
    sat, paced, warm = f.saturated.fake, f.paced.fake, f.warmup.fake
    rate = sat["answered"] / sat["wall_s"]
    steady = _steady_rate(f.saturated)
    lat = paced["latency"]
    rss_warm = f.warmup.ticks[-1][2]
    rss_end = f.paced.ticks[-1][2]
    # from the first tenth of the saturated phase: by then its 1,000 turns in flight have sized the heap
    first_n, _, rss_first = f.saturated.ticks[0]
    growth = rss_end - rss_first
    measured = sat["answered"] + paced["answered"] - first_n
    peak = max(m for phase in (f.warmup, f.saturated, f.paced) for _, _, m in phase.ticks)
    sessions = " / ".join(f"{n} {p.capitalize()}" for p, n in f.sessions.items())
    versions = ", ".join(
        f"{pkg} {metadata.version(pkg)}" for pkg in ("python-telegram-bot", "slack_bolt", "discord.py", "aiohttp")
    )
    print(
        f"\nchannel throughput: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{sum(f.sessions.values()):,} sessions ({sessions}); {versions}\n"
        f"daemon side in this process (RSS below); fakes and driver in a child process\n"
    )
    rows = [
        ("figure", "value", "target", "verdict"),
        (f"sustained turns/s, saturated ({sat['answered']:,} turns)",
         f"{rate:,.0f} (steady middle 80%: {steady:,.0f})", f">= {TARGET_RATE:.0f}", _verdict(rate >= TARGET_RATE)),
        ("  of which per platform (turns/s)",
         ", ".join(f"{p} {s['n'] / sat['wall_s']:,.0f}" for p, s in sat["by_platform"].items()), "-", "-"),
        (f"latency p50 / p99, paced at {paced['offered_rate']:.0f}/s ({lat['n']:,} turns)",
         f"{_ms(lat['p50'])} / {_ms(lat['p99'])}", f"p99 < {TARGET_P99_S * 1000:.0f} ms",
         _verdict(lat["p99"] < TARGET_P99_S)),
        ("RSS channels ready / after warm-up / end",
         f"{f.rss_ready:.1f} / {rss_warm:.1f} / {rss_end:.1f} MiB", f"< {TARGET_RSS_MIB:.0f} MiB",
         _verdict(peak < TARGET_RSS_MIB)),
        (f"RSS growth over the last {measured:,} turns",
         f"{growth:+.1f} MiB (from warm-up end: {rss_end - rss_warm:+.1f}; VmHWM {f.rss_hwm:.1f})",
         f"flat (< {FLAT_MIB:.0f} MiB)", _verdict(growth < FLAT_MIB)),
    ]
    for i, (name, value, target, verdict) in enumerate(rows):
        print(f"{name:<52} {value:<50} {target:<18} {verdict}")
        if i == 0:
            print("-" * 130)

    print("\nlatency by phase and platform (fake hands the message over -> fake receives the reply):")
    for result in (warm, sat, paced):
        whole = result["latency"]
        print(
            f"  {result['phase']:<10} {result['answered']:>6,} turns in {result['wall_s']:6.1f} s "
            f"({result['answered'] / result['wall_s']:,.0f}/s): p50 {_ms(whole['p50'])}, p90 {_ms(whole['p90'])}, "
            f"p99 {_ms(whole['p99'])}, max {_ms(whole['max'])}"
        )
        for name, s in result["by_platform"].items():
            print(f"      {name:<9} {s['n']:>6,}: p50 {_ms(s['p50'])}, p99 {_ms(s['p99'])}, max {_ms(s['max'])}")

    print("\nRSS of the daemon side (MiB) at each tenth of a phase:")
    for phase in (f.saturated, f.paced):
        print(f"  {phase.name:<10} " + "  ".join(f"{n:>6,}:{m:6.1f}" for n, _, m in phase.ticks))

    print("\nCPU seconds (user+sys) per phase, and share of one CPU over its wall time:")
    for phase in (f.warmup, f.saturated, f.paced):
        wall = phase.fake["wall_s"]
        n = max(1, phase.fake["answered"])
        print(
            f"  {phase.name:<10} daemon {phase.daemon_cpu_s:5.1f} s ({phase.daemon_cpu_s / wall:4.0%}, "
            f"{phase.daemon_cpu_s / n * 1e3:.2f} ms per turn); fakes+driver {phase.fake['fake_cpu_s']:5.1f} s "
            f"({phase.fake['fake_cpu_s'] / wall:4.0%}); other processes {phase.others_cpu_s:5.1f} s "
            f"({phase.others_cpu_s / wall:4.0%})"
        )

    answered = {p: s["n"] for p, s in sat["by_platform"].items()}
    print("\nHTTP/API requests per turn seen by the fakes (saturated phase):")
    print("  " + _per_turn(sat["requests"], answered).replace("; ", "\n  "))
    print("  client connections the fakes saw (distinct peer addresses): "
          + ", ".join(f"{p} {n:,}" for p, n in sat["connections"].items()))

    problems = {
        phase["phase"]: (phase["lost"], phase["mismatches"])
        for phase in (warm, sat, paced) if phase["lost"] or phase["mismatches"]
    }
    print(
        f"""
checks:
  replies matched to their message in every phase: {"yes" if not problems else f"NO {problems}"}; \
replies to nobody: {paced['strays']}
  asyncio tasks alive: channels ready {f.tasks_ready}, end {f.tasks_end}; \
{", ".join(f"{k} {v}" for k, v in f.leftovers.items())}
notes:
  latency includes the fakes' own work (JSON, aiohttp, the child's event loop) on both ends.
  logging: the daemon's default INFO level, to a file as journald would take it: {f.turn_log_lines:,} per-turn lines.
  typing: the channels keep the default typing_after_s = 0.5; this provider answers well within it, so
  no typing indicator is sent (a slower turn would send one after 0.5 s, then every 4 s).
  saturated latency is queueing: {sum(f.sessions.values()):,} sessions with one message each outstanding \
/ {rate:,.0f} turns/s ~ {sum(f.sessions.values()) / rate:.2f} s.
  paced rate: min(--paced-rate {args.paced_rate:g}, {PACED_MAX_LOAD:.0%} of the measured capacity) = \
{f.paced_rate:.0f}/s, for {args.paced_seconds:g} s.
  history: the agent keeps the default max_history_messages = 40; warm-up gave every session \
{args.warmup} turns ({2 * args.warmup} messages) first.
  RSS growth is taken from the first tenth of the saturated phase: its {sum(f.sessions.values()):,} turns in flight \
raise the heap once
  above the warm-up's quiet end (a step, not a trend; the per-tenth samples above show which).
  other processes: CPU the rest of the machine used during a phase; above a few % the figures are
  disturbed (2 CPUs: the daemon and the fakes need one each).
  whole bench: {f.elapsed_s:.0f} s."""
    )


def _steady_rate(phase: PhaseResult) -> float:
    """Turns/s between the first and the last tick (10% .. 90%): no ramp-up, no drain."""
    ticks = phase.ticks[:-1]
    if len(ticks) < 2 or ticks[-1][1] <= ticks[0][1]:
        return math.nan
    return (ticks[-1][0] - ticks[0][0]) / (ticks[-1][1] - ticks[0][1])


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS, help=f"saturated turns (default {DEFAULT_TURNS:,})")
    parser.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, help=f"default {DEFAULT_SESSIONS:,}")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="warm-up messages per session")
    parser.add_argument("--paced-rate", type=float, default=DEFAULT_PACED_RATE, help="turns/s in the paced phase")
    parser.add_argument("--paced-seconds", type=float, default=DEFAULT_PACED_SECONDS)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=60, sessions=6, warmup=2, paced_rate=40.0, paced_seconds=0.5)
    args = parser.parse_args()
    if args.turns < args.sessions:
        parser.error("--turns must be at least --sessions (every session has a message outstanding)")
    print(
        f"channel throughput: {args.sessions:,} sessions, warm-up {args.warmup * args.sessions:,} turns, "
        f"saturated {args.turns:,} turns, paced up to {args.paced_rate:g}/s for {args.paced_seconds:g} s",
        flush=True,
    )
    figures = asyncio.run(daemon_main(args))
    report(figures, args)


if __name__ == "__main__":
    cli()
