"""Measure streamed replies: first token to first visible text, platform calls per reply, daemon CPU.

Run from the repository root::

    .venv/bin/python bench/streaming.py [--turns N]

Two processes, loopback only. A child (this file with `--fakes`) runs FakeOpenAI, which
streams scripted answers at a set pace, and FakeTelegram, and answers JSON commands on
stdin; this process is the daemon: `Runtime.open`, the real Telegram adapter (PTB) and a
terminal adapter on a pseudo-terminal, so `time.process_time()` here is the daemon's CPU
alone. Both fakes stamp with `time.monotonic()` (one clock for every process on Linux):

1. latency: the fake model writes its first text piece; the fake Bot API accepts the first
   draft (private chat) or message (group), or the terminal gets its first reply bytes. The
   target is one platform round trip (a getMe measured from here) plus 50 ms.
2. calls per reply: a 2,000-token answer written over 10 s (200 tokens/s) with the default
   `stream_edit_interval_s = 1.0`; the target is about one call per interval, no 429.
3. CPU per turn: the same turns with `stream = true` and `stream = false` (a 200-token
   answer over 1 s, in concurrent chats); the target is streamed within 1.5x of unstreamed.
   `--cpu-only` measures only this, `--anthropic` against FakeAnthropic (the Anthropic
   kind of provider), `--profile FILE` writes a cProfile of each kind of turn.

Figures are printed with their targets, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

TOKEN: Final = "555555:EEE-bench-bot"


# -- the fakes' side (child process) ---------------------------------------------------------


async def fakes_main(anthropic: bool) -> None:
    from dataclasses import replace

    from tests.fakes import anthropic_api
    from tests.fakes.openai_server import FakeOpenAI, paced, text
    from tests.fakes.telegram_api import FakeTelegram

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    model: Any = anthropic_api.FakeAnthropic() if anthropic else FakeOpenAI()
    async with model as llm, FakeTelegram(token=TOKEN, username="bench_bot") as tg:
        print(json.dumps({"llm": llm.base_url, "tg": tg.api_base_url}), flush=True)
        while line := await reader.readline():
            command = json.loads(line)
            op = command["op"]
            answer: Any = None
            if op == "script":
                words = " ".join(f"w{i}" for i in range(command["words"]))
                if anthropic:  # one event per word, spread like `paced`
                    llm.default = replace(anthropic_api.text(words), gap_s=command["over_s"] / command["words"])
                else:
                    llm.default = paced(text(words), over_s=command["over_s"])
                # an unstreamed request is answered when the model has written it all
                llm.latency_s = command.get("unstreamed_wait_s", 0.0)
            elif op == "push":
                tg.push_message(command["chat"], command["user"], command["text"], chat_type=command["chat_type"])
            elif op == "wait":  # until every chat in `chats` shows the final text
                final = " ".join(f"w{i}" for i in range(command["words"]))
                chats = command["chats"]
                await tg.wait_for(lambda: all(final in "".join(tg.shown(c)) for c in chats), timeout=120)
            elif op == "stats":
                answer = {
                    "visible": [(v.at, v.chat_id, v.kind) for v in tg.visible],
                    "first_text_at": getattr(llm, "first_text_at", []),
                    "calls": Counter(c.method for c in tg.requests if c.method != "getUpdates"),
                    "rate_limited": sum(1 for c in tg.requests if c.status == 429),
                }
            elif op == "reset":
                tg.visible.clear()
                tg.requests.clear()
                getattr(llm, "first_text_at", []).clear()
            print(json.dumps({"ok": True, "answer": answer}), flush=True)


# -- the daemon's side -----------------------------------------------------------------------


class Fakes:
    """The child process, driven by one JSON command per line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, **command: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        await self.proc.stdin.drain()
        return json.loads(await self.proc.stdout.readline())["answer"]


class Screen:
    """A terminal's stdout stand-in: it says it is a tty and stamps the first reply bytes."""

    def __init__(self) -> None:
        self.first_reply_at: float | None = None

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.first_reply_at is None and "bot> " in text:
            self.first_reply_at = time.monotonic()
        return len(text)

    def flush(self) -> None:
        return None


def config_toml(llm: str, tg: str, *, stream: bool, interval_s: float, kind: str = "openai") -> str:
    return f"""
[providers.fake]
kind = "{kind}"
base_url = "{llm}"
max_retries = 0

[agents.a]
provider = "fake"
model = "m"

[channels.bot]
kind = "telegram"
token = "env:TG_BENCH"
api_base_url = "{tg}"
poll_timeout_s = 1
format = "plain"
stream = {"true" if stream else "false"}
stream_edit_interval_s = {interval_s}

[channels.term]
kind = "terminal"
user = "op"
stream = {"true" if stream else "false"}

[[routes]]
channel = "bot"
agent = "a"
senders = ["*"]
reply_in_groups = "all"  # the bench's group chats are people talking to the bot

[[routes]]
channel = "term"
agent = "a"
senders = ["op"]
"""


async def with_daemon(folder: Path, fakes: Fakes, urls: dict[str, str], *, stream: bool, interval_s: float,
                      work: Any) -> Any:
    from channels.terminal import TerminalAdapter
    from orchestrator.checks import load_config
    from orchestrator.daemon import Runtime, start_channel

    path = folder / f"config-{stream}-{interval_s}.toml"
    path.write_text(config_toml(urls["llm"], urls["tg"], stream=stream, interval_s=interval_s, kind=urls["kind"]))
    config = load_config(path)
    master, slave = os.openpty()
    screen = Screen()
    async with Runtime.open(config, config_path=path) as runtime:
        terminal = TerminalAdapter(
            name="term", user="op", chat="terminal", stdin=os.fdopen(slave, "rb", buffering=0),
            stdout=screen,  # type: ignore[arg-type]
        )
        await start_channel(runtime, "bot", config.channels["bot"])
        await start_channel(runtime, "term", config.channels["term"], adapter=terminal)
        try:
            return await work(runtime, master, screen)
        finally:
            await runtime.drain(30)
            os.close(master)


async def round_trip_s(runtime: Any) -> float:
    adapter = runtime.channels.get("bot").adapter
    times = []
    for _ in range(20):
        start = time.monotonic()
        await adapter.bot.get_me()
        times.append(time.monotonic() - start)
    return statistics.median(times)


async def latency(fakes: Fakes, urls: dict[str, str], folder: Path, turns: int) -> dict[str, Any]:
    results: dict[str, list[float]] = {"telegram private (draft)": [], "telegram group (message)": [], "terminal": []}

    async def work(runtime: Any, master: int, screen: Screen) -> float:
        rtt = await round_trip_s(runtime)
        for turn in range(turns):
            for label, chat, kind in (("telegram private (draft)", 100 + turn, "private"),
                                      ("telegram group (message)", -(100 + turn), "group")):
                await fakes.ask(op="reset")
                await fakes.ask(op="script", words=50, over_s=1.0)
                await fakes.ask(op="push", chat=chat, user=100 + turn, text="go", chat_type=kind)
                await fakes.ask(op="wait", words=50, chats=[chat])
                stats = await fakes.ask(op="stats")
                first = min(at for at, c, _ in stats["visible"] if c == chat)
                results[label].append(first - stats["first_text_at"][0])
            await fakes.ask(op="reset")
            screen.first_reply_at = None
            os.write(master, b"go\n")
            while not (await fakes.ask(op="stats"))["first_text_at"] or screen.first_reply_at is None:
                await asyncio.sleep(0.01)
            stats = await fakes.ask(op="stats")
            assert screen.first_reply_at is not None
            results["terminal"].append(screen.first_reply_at - stats["first_text_at"][0])
            await asyncio.sleep(1.2)  # let the terminal turn end before the next
        return rtt

    rtt = await with_daemon(folder, fakes, urls, stream=True, interval_s=1.0, work=work)
    return {"rtt": rtt, "latency": results}


async def calls_per_reply(fakes: Fakes, urls: dict[str, str], folder: Path, over_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {}

    async def work(runtime: Any, master: int, screen: Screen) -> None:
        for label, chat, kind in (("private (drafts)", 200, "private"), ("group (edits)", -200, "group")):
            await fakes.ask(op="reset")
            await fakes.ask(op="script", words=2000, over_s=over_s)
            await fakes.ask(op="push", chat=chat, user=200, text="go", chat_type=kind)
            await fakes.ask(op="wait", words=2000, chats=[chat])
            await asyncio.sleep(0.5)
            stats = await fakes.ask(op="stats")
            calls = {k: v for k, v in stats["calls"].items() if k not in ("sendChatAction",)}
            span = max(at for at, c, _ in stats["visible"] if c == chat) - stats["first_text_at"][0]
            out[label] = {"calls": calls, "total": sum(calls.values()), "429": stats["rate_limited"], "span": span}

    await with_daemon(folder, fakes, urls, stream=True, interval_s=1.0, work=work)
    return out


async def cpu_per_turn(fakes: Fakes, urls: dict[str, str], folder: Path, turns: int, rounds: int,
                       profile: str | None = None) -> dict[str, list[float]]:
    """Each kind's CPU per turn, one figure per round of `turns` concurrent group chats."""
    out: dict[str, list[float]] = {}
    for stream in (False, True):
        async def work(runtime: Any, master: int, screen: Screen, stream: bool = stream) -> list[float]:
            # the same model either way: 1 s to write 200 tokens, an unstreamed request answered at its end
            await fakes.ask(op="script", words=200, over_s=1.0, unstreamed_wait_s=0.0 if stream else 1.0)
            # a warm-up turn per chat kind first: imports and first connections are not per-turn costs
            await fakes.ask(op="push", chat=-299, user=299, text="warm", chat_type="group")
            await fakes.ask(op="wait", words=200, chats=[-299])
            await runtime.drain(10)
            profiler = None
            if profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            spent: list[float] = []
            for round_ in range(rounds):
                chats = [-(300 + round_ * turns + i) for i in range(turns)]
                cpu0 = time.process_time()
                for i, chat in enumerate(chats):
                    await fakes.ask(op="push", chat=chat, user=300 + i, text="go", chat_type="group")
                await fakes.ask(op="wait", words=200, chats=chats)
                await runtime.drain(30)
                spent.append((time.process_time() - cpu0) / turns)
            if profiler is not None and profile:
                profiler.disable()
                profiler.dump_stats(f"{profile}.{'streamed' if stream else 'plain'}")
            return spent

        out["streamed" if stream else "not streamed"] = await with_daemon(
            folder, fakes, urls, stream=stream, interval_s=1.0, work=work
        )
    return out


async def floor_per_turn(fakes: Fakes, urls: dict[str, str], turns: int, rounds: int) -> dict[str, float]:
    """What streaming must cost whatever the daemon does, measured with the libraries alone.

    - `read`: aiohttp reading the 200-token answer as a stream (the socket paused between
      reads as the provider does, one `json.loads` per read, nothing else), less aiohttp
      reading the same answer as one body; `turns` at once, as in the CPU figure.
    - `call`: one more platform call, python-telegram-bot's `editMessageText` on the daemon's
      aiohttp request class: a streamed group reply makes at least a first post and a final
      edit where an unstreamed one makes one send.
    """
    import aiohttp
    from telegram import Bot

    from channels.telegram_http import AiohttpRequest

    url = urls["llm"].rstrip("/") + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}

    async with aiohttp.ClientSession() as session:
        async def plain() -> None:
            async with session.post(url, json=body) as response:
                json.loads(await response.read())

        async def streamed() -> None:
            async with session.post(url, json=body | {"stream": True}) as response:
                assert response.connection is not None and response.connection.transport is not None
                transport = response.connection.transport
                rest = b""
                while data := await response.content.readany():
                    *blocks, rest = (rest + data).split(b"\n\n")
                    datas = [block[6:] for block in blocks if block.startswith(b"data: {")]
                    if datas:
                        json.loads(b"[" + b",".join(datas) + b"]")
                        transport.pause_reading()
                        await asyncio.sleep(0.2)
                        transport.resume_reading()

        async def cpu(one: Any) -> float:
            figures = []
            for _ in range(rounds + 1):  # the first round opens the connections
                cpu0 = time.process_time()
                await asyncio.gather(*(one() for _ in range(turns)))
                figures.append((time.process_time() - cpu0) / turns)
            return statistics.median(figures[1:])

        await fakes.ask(op="script", words=200, over_s=1.0, unstreamed_wait_s=1.0)
        plain_s = await cpu(plain)
        await fakes.ask(op="script", words=200, over_s=1.0, unstreamed_wait_s=0.0)
        streamed_s = await cpu(streamed)

    request = dict(connection_pool_size=8, read_timeout=10, write_timeout=10, connect_timeout=10, pool_timeout=10)
    api = urls["tg"].rstrip("/")
    bot = Bot(TOKEN, base_url=f"{api}/bot", request=AiohttpRequest(**request),  # type: ignore[arg-type]
              get_updates_request=AiohttpRequest(**request))  # type: ignore[arg-type]
    async with bot:
        edits = 100
        posted = [await bot.send_message(-(900_000 + i), "first words") for i in range(edits)]
        cpu0 = time.process_time()
        for message in posted:
            await bot.edit_message_text("first words and the rest", chat_id=message.chat_id, message_id=message.message_id)
        call_s = (time.process_time() - cpu0) / edits
    return {"read": streamed_s - plain_s, "call": call_s}


async def daemon_main(args: argparse.Namespace) -> None:
    os.environ["TG_BENCH"] = TOKEN
    from orchestrator.logs import configure_logging

    configure_logging(level="WARNING", fmt="text", sink=sys.stderr)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--fakes", *(["--anthropic"] if args.anthropic else []), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=_ROOT,
    )
    assert proc.stdout is not None
    urls = json.loads(await proc.stdout.readline()) | {"kind": "anthropic" if args.anthropic else "openai"}
    fakes = Fakes(proc)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            if not args.cpu_only and not args.anthropic:
                lat = await latency(fakes, urls, folder, args.turns)
                calls = await calls_per_reply(fakes, urls, folder, args.reply_s)
            cpu = await cpu_per_turn(fakes, urls, folder, args.cpu_turns, args.cpu_rounds, args.profile)
            floor = None if args.anthropic else await floor_per_turn(fakes, urls, args.cpu_turns, args.cpu_rounds)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.wait()
    if not args.cpu_only and not args.anthropic:
        report(lat, calls, args.reply_s)
    plain, streamed = statistics.median(cpu["not streamed"]), statistics.median(cpu["streamed"])
    ratio = streamed / plain
    print(
        f"daemon CPU per turn ({'Anthropic' if args.anthropic else 'OpenAI'} kind, 200 tokens over 1 s, "
        f"{args.cpu_turns} group chats at once, median of {args.cpu_rounds} rounds): "
        f"not streamed {plain * 1000:.1f} ms, streamed {streamed * 1000:.1f} ms, "
        f"ratio {ratio:.2f}x (target <= 1.5x) {'ok' if ratio <= 1.5 else 'over target'}"
    )
    print("  rounds: " + "; ".join(
        f"{kind} " + " ".join(f"{value * 1000:.1f}" for value in values) for kind, values in cpu.items()
    ))
    if floor is not None:
        least = plain + floor["read"] + floor["call"]
        print(
            f"  the floor, measured with the libraries alone: reading the answer as a stream "
            f"+{floor['read'] * 1000:.1f} ms (aiohttp), one more platform call +{floor['call'] * 1000:.1f} ms "
            f"(python-telegram-bot): no streamed turn costs less than {least * 1000:.1f} ms, {least / plain:.2f}x"
        )


def report(lat: dict[str, Any], calls: dict[str, Any], over_s: float) -> None:
    rtt = lat["rtt"]
    print(f"platform round trip (Telegram getMe, median): {rtt * 1000:.1f} ms; target: first text within {rtt * 1000 + 50:.0f} ms")
    print("first model token -> first visible text:")
    for label, values in lat["latency"].items():
        values = sorted(values)
        p50 = statistics.median(values) * 1000
        worst = values[-1] * 1000
        verdict = "ok" if p50 <= rtt * 1000 + 50 else "over target"
        print(f"  {label:26} p50 {p50:6.1f} ms  max {worst:6.1f} ms  ({len(values)} turns)  {verdict}")
    print(f"platform calls for one 2,000-token reply over {over_s:g} s (stream_edit_interval_s = 1.0):")
    for label, figures in calls.items():
        detail = ", ".join(f"{k} {v}" for k, v in sorted(figures["calls"].items()))
        # the bound: one call per interval while it streamed, and the final messages (3 here)
        bound = int(figures["span"] / 1.0) + 1 + figures["calls"].get("sendMessage", 0)
        verdict = "ok" if figures["429"] == 0 and figures["total"] <= bound else "over target"
        print(
            f"  {label:18} {figures['total']:3d} calls in {figures['span']:.1f} s ({detail}); bound {bound}; "
            f"429 answers: {figures['429']}  {verdict}"
        )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fakes", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=5, help="latency samples per platform")
    parser.add_argument("--reply-s", type=float, default=10.0,
                        help="seconds the model takes to write the 2,000-token reply whose platform calls are counted")
    parser.add_argument("--cpu-turns", type=int, default=20, help="turns per CPU figure")
    parser.add_argument("--cpu-rounds", type=int, default=3, help="rounds per CPU figure (the median is reported)")
    parser.add_argument("--cpu-only", action="store_true", help="measure only the CPU per turn")
    parser.add_argument("--anthropic", action="store_true", help="the CPU per turn against FakeAnthropic (implies --cpu-only)")
    parser.add_argument("--profile", metavar="FILE", help="write cProfiles of the CPU turns to FILE.streamed and FILE.plain")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=1, reply_s=1.0, cpu_turns=2, cpu_rounds=1)
    args = parser.parse_args()
    asyncio.run(fakes_main(args.anthropic) if args.fakes else daemon_main(args))


if __name__ == "__main__":
    cli()
