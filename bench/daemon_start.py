"""Measure start-to-READY of `orchestrator run` and its RSS, beside the import floor.

Run from the repository root::

    .venv/bin/python bench/daemon_start.py [--runs N]

The daemon is a real `python -m orchestrator.cli run` subprocess with a terminal channel and one
channel of each platform, pointed at FakeTelegram, FakeSlack and FakeDiscord served by this
process on 127.0.0.1. READY is the `READY=1` datagram on its $NOTIFY_SOCKET; its RSS is read
from /proc/<pid>/status the moment that datagram arrives. Then it gets SIGTERM and must exit 0.

The floor, measured in the same run: a bare `python -c "import ..."` of exactly the modules the
daemon had loaded at READY except its own (`orchestrator`, `channels`), found by one discovery
run through a wrapper whose audit hook writes `sys.modules` out as the daemon connects to
$NOTIFY_SOCKET to send READY=1 (nothing in the daemon is patched). The floor
process prints its VmRSS once the imports are done; its time is spawn to that line. A second
floor adds the daemon's own modules, to split READY into imports and start-up work.

Runs alternate (daemon, floor, floor + own modules) after one untimed warm-up of each, so
drift hits all alike; medians are reported. `--quick` (the test suite's smoke run) makes one
run of each with no warm-ups. Bytecode is cached in a temporary
PYTHONPYCACHEPREFIX for all of them (this environment sets PYTHONDONTWRITEBYTECODE, which
would otherwise recompile the daemon's own modules on every start).

Also checked: a terminal-only config must not import the platform SDKs, mcp, APScheduler or aiohttp.
Targets are printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import keyword
import os
import platform
import re
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/daemon_start.py`

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

DEFAULT_RUNS: Final = 5
TIMEOUT_S: Final = 60.0
TARGET_TIME_RATIO: Final = 1.25
TARGET_RSS_RATIO: Final = 1.2
FIRST_PARTY: Final = ("orchestrator", "channels")
# what a terminal-only daemon (no schedules, MCP servers or gateway) must not import, then
# others worth knowing (openai and httpx serve its provider: imported after READY, off the loop)
MUST_NOT: Final = ("discord", "telegram", "slack_bolt", "slack_sdk", "mcp", "apscheduler", "aiohttp")
ALSO_REPORTED: Final = ("openai", "httpx")

# Runs the daemon unchanged and writes `sys.modules` out to argv[2] when it first connects to
# $NOTIFY_SOCKET (its READY=1: the daemon notifies nothing earlier). An audit hook sees the
# connect whoever sends it, so no name in the daemon is patched and none can be bound too early
# (a replaced `systemd.notify` went unseen once `daemon/serving.py` had imported it). The
# hook runs in the daemon's thread before the datagram leaves, so the file is complete by the
# time the bench reads READY=1.
WRAPPER: Final = """\
import json, os, sys
_out, _address, _seen = sys.argv[2], os.environ["NOTIFY_SOCKET"], []
def _at_notify(event, args):
    if event == "socket.connect" and not _seen and args[1] == _address:
        _seen.append(True)
        names = [n for n, m in list(sys.modules.items())
                 if getattr(m, "__spec__", None) is not None and m.__spec__.name == n]
        with open(_out, "w") as f:
            json.dump(names, f)
sys.addaudithook(_at_notify)
from orchestrator.cli import main
sys.exit(main(["run", "--config", sys.argv[1]]))
"""

FLOOR_TAIL: Final = """
for _line in open("/proc/self/status"):
    if _line.startswith("VmRSS:"):
        print(_line.split()[1], flush=True)
"""

CONFIG_HEAD: Final = """\
[daemon]
state_dir = "{state_dir}"

[providers.local]
base_url = "http://127.0.0.1:9/v1"  # never contacted: no message is sent in this bench

[agents.helper]
provider = "local"
model = "m"
system_prompt = "You help."

[channels.term]
kind = "terminal"
user = "op"

[[routes]]
channel = "term"
agent = "helper"
senders = ["op"]
"""

CONFIG_PLATFORMS: Final = """
[channels.tg]
kind = "telegram"
token = "env:BENCH_TG_TOKEN"
api_base_url = "{tg_url}"

[channels.slack]
kind = "slack"
bot_token = "env:BENCH_SLACK_BOT_TOKEN"
app_token = "env:BENCH_SLACK_APP_TOKEN"
api_base_url = "{slack_url}"

[channels.discord]
kind = "discord"
token = "env:BENCH_DISCORD_TOKEN"
api_base_url = "{discord_url}"
gateway_url = "{discord_gateway}"
{discord_extra}
[[routes]]
channel = "tg"
agent = "helper"
senders = ["*"]

[[routes]]
channel = "slack"
agent = "helper"
senders = ["*"]

[[routes]]
channel = "discord"
agent = "helper"
senders = ["*"]
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One start: seconds to READY (or to the floor's RSS line) and RSS in MiB then."""

    seconds: float
    rss_mib: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    name: str
    samples: tuple[Sample, ...]

    @property
    def seconds(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def rss(self) -> float:
        return statistics.median(s.rss_mib for s in self.samples)

    def spread(self) -> str:
        times = sorted(s.seconds for s in self.samples)
        return f"{times[0]:.2f}-{times[-1]:.2f} s"


class Bench:
    """Spawns daemons and floors with one environment and a notify socket."""

    def __init__(self, folder: Path, env: Mapping[str, str]) -> None:
        self.folder = folder
        self.env = dict(env)
        self.stop_s: list[float] = []

    def rss_mib(self, pid: int) -> float:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for pid {pid}")

    @asynccontextmanager
    async def notify_socket(self) -> AsyncIterator[tuple[str, socket.socket]]:
        address = str(self.folder / f"notify-{time.monotonic_ns()}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(address)
            sock.setblocking(False)
            yield address, sock
        finally:
            sock.close()
            Path(address).unlink(missing_ok=True)

    async def daemon(self, argv: Sequence[str], *, log: Path) -> Sample:
        """Start a daemon, wait for READY=1, read its RSS, SIGTERM it and expect exit 0."""
        async with self.notify_socket() as (address, sock):
            stderr = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # the daemon's log, kept for errors
            try:
                t0 = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
                    cwd=_ROOT, env={**self.env, "NOTIFY_SOCKET": address},
                )
                try:
                    if not await self._ready_or_exit(proc, sock):
                        tail = log.read_text(errors="replace")[-3000:]
                        raise SystemExit(f"daemon exited {proc.returncode} before READY=1; its log:\n{tail}")
                    ready = time.perf_counter() - t0
                    rss = self.rss_mib(proc.pid)
                    t1 = time.perf_counter()
                    proc.send_signal(signal.SIGTERM)
                    async with asyncio.timeout(TIMEOUT_S):
                        code = await proc.wait()
                    self.stop_s.append(time.perf_counter() - t1)
                except TimeoutError:
                    tail = log.read_text(errors="replace")[-3000:]
                    raise SystemExit(f"daemon not READY or not stopped within {TIMEOUT_S:g}s; its log:\n{tail}") from None
                finally:
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
            finally:
                os.close(stderr)
        if code != 0:
            raise SystemExit(f"daemon exited {code} after SIGTERM; its log:\n{log.read_text(errors='replace')[-3000:]}")
        return Sample(seconds=ready, rss_mib=rss)

    async def _ready_or_exit(self, proc: asyncio.subprocess.Process, sock: socket.socket) -> bool:
        """Return True at READY=1, False if the process exits first; TimeoutError after TIMEOUT_S."""
        loop = asyncio.get_running_loop()

        async def ready() -> None:
            while b"READY=1" not in await loop.sock_recv(sock, 4096):
                pass

        async with asyncio.timeout(TIMEOUT_S), asyncio.TaskGroup() as group:
            waits = [group.create_task(ready()), group.create_task(proc.wait())]
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
        return waits[0] in done

    async def floor(self, modules: Sequence[str], *, importtime: bool = False) -> tuple[Sample, str]:
        """Run `python -c "import <modules>"`; time spawn -> its RSS line."""
        code = _import_script(modules) + FLOOR_TAIL
        flags = ["-X", "importtime"] if importtime else []
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *flags, "-c", code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=_ROOT, env=self.env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        line = await proc.stdout.readline()
        seconds = time.perf_counter() - t0
        _, err = await proc.communicate()
        if proc.returncode != 0 or not line.strip().isdigit():
            raise SystemExit(f"floor import failed (exit {proc.returncode}): {err.decode()[-2000:]}")
        return Sample(seconds=seconds, rss_mib=int(line) / 1024), err.decode()

    async def loaded_at_ready(self, config: Path, name: str) -> list[str]:
        """Run the daemon once through the wrapper; return the modules it held at READY."""
        out = self.folder / f"modules-{name}.json"
        await self.daemon([sys.executable, "-c", WRAPPER, str(config), str(out)], log=self.folder / f"{name}.log")
        names: list[str] = json.loads(out.read_text())
        return names


def _import_script(modules: Sequence[str]) -> str:
    """Return `import a, b.c, ...`; a name that is no dotted identifier goes through __import__."""
    plain = [m for m in modules if all(part.isidentifier() and not keyword.iskeyword(part) for part in m.split("."))]
    odd = [m for m in modules if m not in set(plain)]
    return "import " + ", ".join(plain) + "\n" + "".join(f"__import__({m!r})\n" for m in odd)


def top_level(names: Sequence[str]) -> set[str]:
    return {n.partition(".")[0] for n in names}


def largest_imports(importtime: str, count: int = 8) -> list[tuple[str, float]]:
    """Return the top-level imports with the largest cumulative time (ms) from -X importtime."""
    found: dict[str, float] = {}
    for line in importtime.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
        if match and not match[3]:  # nesting level 0: imported by the floor script itself
            name = match[4].partition(".")[0]
            found[name] = found.get(name, 0.0) + int(match[2]) / 1000
    return sorted(found.items(), key=lambda item: -item[1])[:count]


def write_config(path: Path, state: Path, fakes: tuple[FakeTelegram, FakeSlack, FakeDiscord] | None,
                 discord_extra: str = "") -> Path:
    text = CONFIG_HEAD.format(state_dir=state)
    if fakes is not None:
        tg, slack, dc = fakes
        text += CONFIG_PLATFORMS.format(
            tg_url=tg.api_base_url, slack_url=slack.api_base_url, discord_url=dc.api_base_url,
            discord_gateway=dc.gateway_url, discord_extra=discord_extra,
        )
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    daemon: Series
    daemon_fast_discord: Series
    floor: Series
    floor_own: Series
    modules: int
    own_modules: int
    largest: list[tuple[str, float]]
    terminal_only: Sample
    terminal_loaded: dict[str, bool]
    platform_loaded: dict[str, bool]
    stop_s: float


async def measure(runs: int, *, quick: bool = False) -> Figures:
    """Run the discovery, the warm-ups and `runs` alternating timed runs; `quick` skips the warm-ups.

    `quick` (the test suite's smoke run) also keeps the environment's bytecode settings: a fresh
    PYTHONPYCACHEPREFIX costs a compile of every module on the first start.
    """
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeDiscord() as dc:
        with tempfile.TemporaryDirectory(prefix="daemon-start-") as tmp:
            folder = Path(tmp)
            env = dict(os.environ)
            if not quick:
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
            env |= {
                "BENCH_TG_TOKEN": tg.token,
                "BENCH_SLACK_BOT_TOKEN": slack.bot_token,
                "BENCH_SLACK_APP_TOKEN": slack.app_token,
                "BENCH_DISCORD_TOKEN": dc.token,
            }
            bench = Bench(folder, env)
            fakes = (tg, slack, dc)
            full = write_config(folder / "config.toml", folder / "state", fakes)
            fast = write_config(folder / "fast.toml", folder / "state-fast", fakes, "guild_ready_timeout_s = 0\n")
            terminal = write_config(folder / "terminal.toml", folder / "state-terminal", None)
            daemon = [sys.executable, "-m", "orchestrator.cli", "run", "--config"]

            print("discovery: the modules a daemon holds at READY ...", flush=True)
            if not quick:
                await bench.loaded_at_ready(full, "warm")  # compiles bytecode into the prefix first
            loaded = await bench.loaded_at_ready(full, "full")
            own = [n for n in loaded if n.partition(".")[0] in FIRST_PARTY]
            floor_modules = [n for n in loaded if n.partition(".")[0] not in FIRST_PARTY]
            if not quick:
                await bench.daemon([*daemon, str(terminal)], log=folder / "terminal.log")  # warm-up
            terminal_only = await bench.daemon([*daemon, str(terminal)], log=folder / "terminal.log")
            terminal_loaded_names = top_level(await bench.loaded_at_ready(terminal, "terminal"))

            _, importtime = await bench.floor(floor_modules, importtime=True)
            if not quick:
                await bench.floor(floor_modules + own)  # warm-up
                await bench.daemon([*daemon, str(fast)], log=folder / "daemon.log")  # warm-up
            daemon_s, fast_s, floor_s, own_s = [], [], [], []
            for i in range(runs):
                print(f"run {i + 1}/{runs} ...", flush=True)
                daemon_s.append(await bench.daemon([*daemon, str(full)], log=folder / "daemon.log"))
                floor_s.append((await bench.floor(floor_modules))[0])
                own_s.append((await bench.floor(floor_modules + own))[0])
                fast_s.append(await bench.daemon([*daemon, str(fast)], log=folder / "daemon.log"))
            watched = (*MUST_NOT, *ALSO_REPORTED)
            return Figures(
                daemon=Series(name="daemon", samples=tuple(daemon_s)),
                daemon_fast_discord=Series(name="daemon, discord guild_ready_timeout_s = 0", samples=tuple(fast_s)),
                floor=Series(name="floor", samples=tuple(floor_s)),
                floor_own=Series(name="floor + own modules", samples=tuple(own_s)),
                modules=len(floor_modules),
                own_modules=len(own),
                largest=largest_imports(importtime),
                terminal_only=terminal_only,
                terminal_loaded={name: name in terminal_loaded_names for name in watched},
                platform_loaded={name: name in top_level(loaded) for name in watched},
                stop_s=statistics.median(bench.stop_s),
            )


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def report(f: Figures, runs: int) -> None:
    print(
        f"\ndaemon start: Python {platform.python_version()}, {os.cpu_count()} CPUs, median of {runs} runs; "
        f"config: terminal + Telegram + Slack + Discord channels against loopback fakes\n"
    )
    header = f"{'':<52} {'READY / imported':>17} {'spread':>13} {'RSS':>10}   {'time x floor':>12} {'RSS x floor':>11}"
    print(header)
    print("-" * len(header))
    for series in (f.daemon, f.daemon_fast_discord, f.floor_own, f.floor):
        label = {
            "daemon": "`orchestrator run` start -> READY=1",
            "floor": f"floor: import the {f.modules} modules it loaded",
            "floor + own modules": f"floor + its {f.own_modules} own modules",
        }.get(series.name, f"same, {series.name.removeprefix('daemon, ')}")
        print(
            f"{label:<52} {series.seconds:>15.3f} s {series.spread():>13} {series.rss:>6.1f} MiB"
            f"   {series.seconds / f.floor.seconds:>11.2f}x {series.rss / f.floor.rss:>10.2f}x"
        )
    time_ratio = f.daemon.seconds / f.floor.seconds
    rss_ratio = f.daemon.rss / f.floor.rss
    fast_ratio = f.daemon_fast_discord.seconds / f.floor.seconds
    print(
        f"""
targets:
  READY within {TARGET_TIME_RATIO}x of the import floor in time: x{time_ratio:.2f} {verdict(time_ratio <= TARGET_TIME_RATIO)} \
(with guild_ready_timeout_s = 0: x{fast_ratio:.2f} {verdict(fast_ratio <= TARGET_TIME_RATIO)})
  RSS at READY within {TARGET_RSS_RATIO}x of the floor's: x{rss_ratio:.2f} {verdict(rss_ratio <= TARGET_RSS_RATIO)}
  nothing imported that the config does not use (terminal-only config): """
        + ("meets" if not any(f.terminal_loaded[n] for n in MUST_NOT) else "MISSES")
    )
    print("  imported at READY            " + "  ".join(f"{n:<10}" for n in f.terminal_loaded))
    for label, loaded in (("terminal-only config", f.terminal_loaded), ("terminal + 3 platforms", f.platform_loaded)):
        print(f"  {label:<28} " + "  ".join(f"{'yes' if loaded[n] else 'no':<10}" for n in loaded))
    largest = ", ".join(f"{name} {ms:.0f} ms" for name, ms in f.largest)
    print(
        f"""
notes:
  terminal-only daemon: READY in {f.terminal_only.seconds:.3f} s at {f.terminal_only.rss_mib:.1f} MiB.
  SIGTERM at READY -> exit 0: {f.stop_s:.2f} s (median).
  largest imports in the floor (cumulative, one -X importtime run, so inflated): {largest}.
  the floor runs no config, logging, SQLite or network; `floor + own modules` also imports the
  daemon's own code, so READY minus it is the start-up work itself.
  discord.py fires on_ready only after guild_ready_timeout (default 2 s) passes without a
  GUILD_CREATE, even for a bot in no guild; the adapter reports such a bot ready on connect
  (the fake's bot is in no guild), so both rows should match."""
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"timed runs of each (default {DEFAULT_RUNS})")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=1)
    args = parser.parse_args()
    started = time.perf_counter()
    figures = asyncio.run(measure(args.runs, quick=args.quick))
    report(figures, args.runs)
    print(f"  whole bench: {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    cli()
