"""Measure what orchestrator adds to a tool-call turn, beside a bare-SDK floor.

Run from the repository root::

    .venv/bin/python bench/turn_overhead.py [--turns N] [--long-turns M]

One process, loopback only.  A turn is: user message -> model asks for `list_dir {}` ->
the tool runs -> model answers with final text (two model requests).

(a) `resolve()` + `run_tool_call_loop` with an in-process zero-latency provider.
(b) the same through the real OpenAI-compatible provider against the loopback fake,
    beside the floor: the same two requests from a bare `openai.AsyncOpenAI` loop.
(c) as (b) in one long session: the transcript grows until the history window
    (`max_history_messages = 800`) is full, then M turns are measured at that window
    beside a floor sending the same 800-message history.  M defaults to 100, not the
    1,800 turns a 2,000-turn session would leave: at 800 messages the SDK alone spends
    ~130 ms per request, so 1,800 turns each (ours and floor) would take ~16 minutes.

Plus `resolve()` cached and uncached, a cold `orchestrator agent` one-shot and
`orchestrator --help`.  Targets are printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/turn_overhead.py`

import openai  # noqa: E402

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.config import Config  # noqa: E402
from orchestrator.engine import StopReason, Transcript, TurnResult, run_tool_call_loop  # noqa: E402
from orchestrator.providers import ProviderPool, ToolCall  # noqa: E402
from orchestrator.seam import ConstructionPath, Services, resolve  # noqa: E402
from orchestrator.tools import BUILTIN_TOOLS  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call  # noqa: E402
from bench.fake_provider import FakeProvider, calls_then_text  # noqa: E402
from bench.sdk_floor import FloorSession  # noqa: E402

AGENT: Final = "bench"
WIDE_AGENT: Final = "wide"
MODEL: Final = "bench-model"
TEMPERATURE: Final = 0.2
SYSTEM_PROMPT: Final = "You are a benchmark agent. Use list_dir when asked about files."
USER_MESSAGE: Final = "What is in the workspace?"
FINAL_TEXT: Final = "The workspace is empty."
EMPTY_LISTING: Final = "(empty directory)"  # what list_dir returns for the empty workspace
HISTORY_WINDOW: Final = 800
WARMUP_TURNS: Final = 50
BLOCKS: Final = 10  # ours and the floor alternate in blocks, so drift hits both alike
PATH: Final = ConstructionPath.CLI_RUN

CONFIG_TOML: Final = """\
[daemon]
state_dir = "{state_dir}"

[providers.fake]
base_url = "{base_url}"
timeout_s = 30
max_retries = 2

[agents.{agent}]
provider = "fake"
model = "{model}"
temperature = {temperature}
system_prompt = "{system_prompt}"
autonomy = "full"
tools = ["list_dir"]

[agents.{agent}.budget]
max_tool_iterations = 4
max_history_messages = {window}
max_actions_per_hour = 1000000000

[agents.{agent}.context]
max_context_tokens = 10000000  # the whole {window}-message window is sent, as the floor sends it

[agents.{wide}]
provider = "fake"
model = "{model}"
system_prompt = "{system_prompt}"
autonomy = "full"
tools = ["*"]

[agents.{wide}.http_fetch]
allowed_hosts = ["example.org"]
"""


# ---------------------------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """Per-turn (or per-call) samples in nanoseconds, with the wall time they took."""

    samples_ns: tuple[int, ...]
    wall_s: float

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ns)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ns)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    @property
    def rate(self) -> float:
        return len(self.samples_ns) / self.wall_s if self.wall_s > 0 else float("inf")


def fmt(ns: float) -> str:
    """Return a duration in the unit that reads best."""
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    return f"{ns / 1_000_000_000:.2f} s"


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


# ------------------------------------------------------------------------------- providers


def zero_latency_provider() -> FakeProvider:
    """An in-process provider: a `list_dir {}` call after the user message, then final text."""
    return FakeProvider(calls_then_text([ToolCall(id="call_bench", name="list_dir", arguments="{}")], FINAL_TEXT))


def responder(body: dict[str, Any]) -> Reply:
    """Ask for `list_dir` after a user message; answer with text after a tool result."""
    if body["messages"][-1]["role"] == "user":
        return tool_call("list_dir", {})
    return text(FINAL_TEXT)


# ---------------------------------------------------------------------------------- runners


def floor_session(
    client: openai.AsyncOpenAI, tools: list[dict[str, Any]], *, history: Sequence[dict[str, Any]] = ()
) -> FloorSession:
    """The floor with the agent's own settings, as a bare SDK caller would hard-code them."""
    return FloorSession(
        client, tools=tools, model=MODEL, temperature=TEMPERATURE, system_prompt=SYSTEM_PROMPT,
        tool_output=EMPTY_LISTING, window=HISTORY_WINDOW, history=history,
    )


class OurSession:
    """`resolve()` + `run_tool_call_loop`, a fresh transcript per turn unless `long`."""

    def __init__(self, config: Config, services: Services, *, long: bool = False) -> None:
        self._config = config
        self._services = services
        self.transcript: Transcript | None = Transcript(session="long") if long else None
        self.failures: list[TurnResult] = []

    async def turn(self, message: str) -> str:
        execution = resolve(self._config, AGENT, path=PATH, services=self._services)
        transcript = self.transcript or Transcript(session="bench")
        result = await run_tool_call_loop(execution, transcript, message)
        if result.stop is not StopReason.COMPLETED or result.executed != ("list_dir",):
            self.failures.append(result)
        return result.text


Turn = Callable[[str], Awaitable[str]]


async def timed_turns(turn: Turn, count: int, fake: FakeOpenAI | None = None) -> Figures:
    samples: list[int] = []
    clock = time.perf_counter_ns
    started = clock()
    for _ in range(count):
        t0 = clock()
        await turn(USER_MESSAGE)
        samples.append(clock() - t0)
        if fake is not None:
            fake.requests.clear()  # the fake keeps every body; 800-message bodies add up
    return Figures(samples_ns=tuple(samples), wall_s=(clock() - started) / 1e9)


def merge(parts: Sequence[Figures]) -> Figures:
    return Figures(
        samples_ns=tuple(s for p in parts for s in p.samples_ns), wall_s=sum(p.wall_s for p in parts)
    )


async def interleaved(ours: Turn, floor: Turn, turns: int, fake: FakeOpenAI) -> tuple[Figures, Figures]:
    """Run `turns` of each, alternating in blocks so that machine drift hits both alike."""
    await timed_turns(ours, WARMUP_TURNS, fake)
    await timed_turns(floor, WARMUP_TURNS, fake)
    per_block = max(1, turns // BLOCKS)
    ours_parts: list[Figures] = []
    floor_parts: list[Figures] = []
    done = 0
    while done < turns:
        n = min(per_block, turns - done)
        floor_parts.append(await timed_turns(floor, n, fake))
        ours_parts.append(await timed_turns(ours, n, fake))
        done += n
    return merge(ours_parts), merge(floor_parts)


def check(session: OurSession, scenario: str) -> None:
    if session.failures:
        first = session.failures[0]
        raise SystemExit(
            f"{scenario}: {len(session.failures)} turns did not complete as (tool call -> text); "
            f"first: stop={first.stop.value} executed={first.executed} text={first.text!r}"
        )


def body_size(request: Mapping[str, Any]) -> tuple[int, int]:
    """Return (messages, JSON bytes) of one recorded request body."""
    return len(request["messages"]), len(json.dumps(request, separators=(",", ":")))


# ---------------------------------------------------------------------------- scenarios


async def scenario_a(config: Config, turns: int) -> Figures:
    services = Services(providers=ProviderPool(factory=zero_latency_provider().factory))
    session = OurSession(config, services)
    await timed_turns(session.turn, WARMUP_TURNS)
    gc.collect()
    figures = await timed_turns(session.turn, turns)
    await services.providers.aclose()
    check(session, "(a)")
    return figures


async def scenario_b(
    config: Config, fake: FakeOpenAI, client: openai.AsyncOpenAI, tools: list[dict[str, Any]], turns: int
) -> tuple[Figures, Figures]:
    services = Services()
    try:
        session = OurSession(config, services)

        async def floor_turn(message: str) -> str:
            return await floor_session(client, tools).turn(message)

        gc.collect()
        ours, floor = await interleaved(session.turn, floor_turn, turns, fake)
        check(session, "(b)")
        return ours, floor
    finally:
        await services.providers.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class LongSession:
    fill: Figures
    fill_turns: int
    ours: Figures
    floor: Figures
    ours_body: tuple[int, int]
    floor_body: tuple[int, int]


async def scenario_c(
    config: Config,
    fake: FakeOpenAI,
    client: openai.AsyncOpenAI,
    tools: list[dict[str, Any]],
    turns: int,
) -> LongSession:
    services = Services()
    try:
        session = OurSession(config, services, long=True)
        transcript = session.transcript
        assert transcript is not None
        # Grow the session through real turns until the window is full (4 messages a turn).
        fill_samples: list[int] = []
        fill_started = time.perf_counter_ns()
        while len(transcript.messages) < HISTORY_WINDOW:
            t0 = time.perf_counter_ns()
            await session.turn(USER_MESSAGE)
            fill_samples.append(time.perf_counter_ns() - t0)
            fake.requests.clear()
        fill = Figures(
            samples_ns=tuple(fill_samples), wall_s=(time.perf_counter_ns() - fill_started) / 1e9
        )
        # The floor starts from the same history, so both send the same window from here on.
        floor = floor_session(client, tools, history=transcript.messages)
        ours_samples: list[int] = []
        floor_samples: list[int] = []
        ours_wall = floor_wall = 0
        ours_body = floor_body = (0, 0)
        gc.collect()
        for _ in range(turns):  # alternate turn by turn: both always at the full window
            t0 = time.perf_counter_ns()
            await session.turn(USER_MESSAGE)
            ours_samples.append(time.perf_counter_ns() - t0)
            ours_wall += ours_samples[-1]
            ours_body = body_size(fake.requests[-1])
            fake.requests.clear()
            t0 = time.perf_counter_ns()
            await floor.turn(USER_MESSAGE)
            floor_samples.append(time.perf_counter_ns() - t0)
            floor_wall += floor_samples[-1]
            floor_body = body_size(fake.requests[-1])
            fake.requests.clear()
        check(session, "(c)")
        return LongSession(
            fill=fill,
            fill_turns=len(fill_samples),
            ours=Figures(samples_ns=tuple(ours_samples), wall_s=ours_wall / 1e9),
            floor=Figures(samples_ns=tuple(floor_samples), wall_s=floor_wall / 1e9),
            ours_body=ours_body,
            floor_body=floor_body,
        )
    finally:
        await services.providers.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveCost:
    tools: int
    cached: Figures
    uncached: Figures


def resolve_cost(config: Config, agent: str, *, batches: int = 200, batch: int = 100) -> ResolveCost:
    """Time `resolve()` on a warm cache (per call) and on an empty cache (first per generation)."""
    services = Services()
    execution = resolve(config, agent, path=PATH, services=services)
    clock = time.perf_counter_ns
    cached: list[int] = []
    started = clock()
    for _ in range(batches):
        t0 = clock()
        for _ in range(batch):
            resolve(config, agent, path=PATH, services=services)
        cached.append((clock() - t0) // batch)
    cached_wall = (clock() - started) / 1e9
    uncached: list[int] = []
    uncached_wall = 0
    for _ in range(batches):
        fresh = Services()  # an empty cache: what the first turn of a new generation pays
        t0 = clock()
        resolve(config, agent, path=PATH, services=fresh)
        uncached.append(clock() - t0)
        uncached_wall += uncached[-1]
    return ResolveCost(
        tools=len(execution.tools),
        cached=Figures(samples_ns=tuple(cached), wall_s=cached_wall),
        uncached=Figures(samples_ns=tuple(uncached), wall_s=uncached_wall / 1e9),
    )


async def wall_times(argv: Sequence[str], runs: int, *, expect: str | None = None) -> Figures:
    """Time `runs` subprocess runs of `argv` (one untimed warm-up first)."""
    samples: list[int] = []
    for i in range(runs + 1):
        t0 = time.perf_counter_ns()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        elapsed = time.perf_counter_ns() - t0
        if proc.returncode != 0 or (expect is not None and out.decode().strip() != expect):
            raise SystemExit(
                f"{' '.join(argv)} failed (exit {proc.returncode}): {out.decode()!r} {err.decode()!r}"
            )
        if i:
            samples.append(elapsed)
    return Figures(samples_ns=tuple(samples), wall_s=sum(samples) / 1e9)


# ----------------------------------------------------------------------------------- report


def _med_p95(f: Figures) -> str:
    return f"{fmt(f.median)} / {fmt(f.p95)}"


def report(
    *,
    a: Figures,
    b: tuple[Figures, Figures],
    c: LongSession,
    cost: ResolveCost,
    cost_one: ResolveCost,
    one_shot: Figures,
    help_: Figures,
    elapsed_s: float,
) -> None:
    """Print the figures table, each row with its target, then what the rows mean."""
    ours_b, floor_b = b
    diff_b = ours_b.median - floor_b.median
    ratio_c = c.ours.median / c.floor.median
    per_tool = (cost.uncached.median - cost_one.uncached.median) / max(1, cost.tools - cost_one.tools)
    estimate_30 = cost.uncached.median + per_tool * (30 - cost.tools)
    rows = [
        ("scenario", "ours: median / p95 / turns/s", "floor: median / p95", "vs floor", "target"),
        (f"(a) in-process provider, {len(a.samples_ns)} turns",
         f"{_med_p95(a)} / {a.rate:,.0f}", "-", "-",
         f"median < 1 ms: {verdict(a.median < 1e6)}"),
        (f"(b) OpenAI-compat, {len(ours_b.samples_ns)} turns",
         f"{_med_p95(ours_b)} / {ours_b.rate:,.0f}", _med_p95(floor_b), f"{diff_b / 1e6:+.2f} ms",
         f"within 1.5 ms of floor: {verdict(diff_b < 1.5e6)}"),
        (f"(c) long session @{HISTORY_WINDOW} msgs, {len(c.ours.samples_ns)} turns",
         f"{_med_p95(c.ours)} / {c.ours.rate:,.1f}", _med_p95(c.floor), f"x{ratio_c:.3f}",
         f"within 1.5x of floor: {verdict(ratio_c < 1.5)}"),
        (f"resolve() cached, {cost.tools} tools", f"{_med_p95(cost.cached)} per call", "-", "-",
         f"< 200 µs: {verdict(cost.cached.median < 200e3)}"),
        (f"resolve() uncached, {cost.tools} tools", _med_p95(cost.uncached), "-", "-",
         "first resolve of a generation; no target"),
        (f"resolve() uncached, {cost_one.tools} tool", _med_p95(cost_one.uncached), "-", "-",
         f"=> ~{fmt(per_tool)} per tool; 30 tools est. ~{fmt(estimate_30)}"),
        (f"cold `orchestrator agent`, {len(one_shot.samples_ns)} runs",
         f"{fmt(one_shot.median)} median, max {fmt(max(one_shot.samples_ns))}", "-", "-",
         f"< 1.0 s: {verdict(one_shot.median < 1e9)}"),
        (f"`orchestrator --help`, {len(help_.samples_ns)} runs",
         f"{fmt(help_.median)} median, max {fmt(max(help_.samples_ns))}", "-", "-",
         f"< 150 ms: {verdict(help_.median < 150e6)}"),
    ]
    print(
        f"\nturn overhead: Python {platform.python_version()}, {os.cpu_count()} CPUs, openai "
        f"{openai.__version__}; a turn = user -> list_dir call -> final text (2 requests)\n"
    )
    for i, (name, ours, floor, versus, target) in enumerate(rows):
        print(f"{name:<38} {ours:<33} {floor:<22} {versus:<11} {target}")
        if i == 0:
            print("-" * 140)
    builtins = ", ".join(sorted(BUILTIN_TOOLS))
    print(
        f"""
notes:
  (b) p95 difference {(ours_b.p95 - floor_b.p95) / 1e6:+.2f} ms; (c) p95 ratio x{c.ours.p95 / c.floor.p95:.3f}.
  (c) the session grew through {c.fill_turns} real turns (median {fmt(c.fill.median)}, {c.fill.wall_s:.1f} s) \
until it held {HISTORY_WINDOW} messages (max_history_messages = {HISTORY_WINDOW}),
      then {len(c.ours.samples_ns)} turns were measured at the full window, alternating turn by turn with \
the floor, which started from a copy of the same history.
      last request: ours {c.ours_body[0]} messages / {c.ours_body[1]:,} bytes, \
floor {c.floor_body[0]} messages / {c.floor_body[1]:,} bytes.
  resolve(): tools=["*"] grants {cost.tools} tools; the built-in registry holds {len(BUILTIN_TOOLS)} ({builtins})
      and no other source adds any to this config, so a 30-tool agent cannot be built here: the 30-tool
      figure is a linear estimate from {cost_one.tools} vs {cost.tools} tools. The cached cost does not depend on tool count.
  cold one-shot: a fresh `orchestrator agent {AGENT} -m ...` process running the whole turn against the \
fake (one untimed warm-up run first).
  whole bench: {elapsed_s:.0f} s."""
    )


# ------------------------------------------------------------------------------------ main


def write_config(folder: Path, base_url: str) -> Path:
    path = folder / "config.toml"
    path.write_text(
        CONFIG_TOML.format(
            state_dir=folder / "state",
            base_url=base_url,
            agent=AGENT,
            wide=WIDE_AGENT,
            model=MODEL,
            temperature=TEMPERATURE,
            system_prompt=SYSTEM_PROMPT,
            window=HISTORY_WINDOW,
        ),
        encoding="utf-8",
    )
    return path


def orchestrator_command() -> str:
    candidate = Path(sys.prefix) / "bin" / "orchestrator"
    if not candidate.exists():
        raise SystemExit(f"{candidate} not found; install the package into this venv first")
    return str(candidate)


async def main(turns: int, long_turns: int, cold_runs: int) -> None:
    started = time.perf_counter()
    command = orchestrator_command()
    with tempfile.TemporaryDirectory(prefix="turn-overhead-") as tmp:
        async with FakeOpenAI(default=responder) as fake:
            config_path = write_config(Path(tmp), fake.base_url)
            config = load_config(config_path)
            # The floor sends the same tool schemas, as the plain list a bare SDK caller would hold.
            tools = list(resolve(config, AGENT, path=PATH, services=Services()).tools.provider_specs())
            client = openai.AsyncOpenAI(
                base_url=fake.base_url, api_key="not-needed", timeout=30, max_retries=2
            )
            try:
                print(f"(a) {turns} turns, in-process provider ...", flush=True)
                a = await scenario_a(config, turns)
                print(f"(b) {turns} turns each, OpenAI-compatible provider and floor ...", flush=True)
                b = await scenario_b(config, fake, client, tools, turns)
                print(
                    f"(c) long session: grow to {HISTORY_WINDOW} messages, then {long_turns} turns"
                    " each at the full window ...",
                    flush=True,
                )
                c = await scenario_c(config, fake, client, tools, long_turns)
            finally:
                await client.close()
            print("resolve() cached / uncached ...", flush=True)
            gc.collect()
            cost = resolve_cost(config, WIDE_AGENT)
            cost_one = resolve_cost(config, AGENT)
            print(f"cold one-shot `orchestrator agent` ({cold_runs} runs) ...", flush=True)
            one_shot = await wall_times(
                [command, "agent", AGENT, "-m", USER_MESSAGE, "--config", str(config_path)],
                cold_runs,
                expect=FINAL_TEXT,
            )
        print(f"`orchestrator --help` ({2 * cold_runs} runs) ...", flush=True)
        help_ = await wall_times([command, "--help"], 2 * cold_runs)
    report(
        a=a,
        b=b,
        c=c,
        cost=cost,
        cost_one=cost_one,
        one_shot=one_shot,
        help_=help_,
        elapsed_s=time.perf_counter() - started,
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=2000, help="turns for (a) and (b) (default 2000)")
    parser.add_argument(
        "--long-turns",
        type=int,
        default=100,
        help="turns measured in (c) once the 800-message window is full (default 100)",
    )
    parser.add_argument(
        "--cold-runs", type=int, default=5, help="cold one-shot runs (default 5; twice as many of --help)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=20, long_turns=5, cold_runs=1)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.long_turns, args.cold_runs))


if __name__ == "__main__":
    cli()
