"""The platforms side of bench/channel_throughput.py: the three fakes and the driver, in a child process.

channel_throughput.py starts this file as `python bench/channel_platforms.py --sessions S`. It
serves FakeTelegram, FakeSlack and FakeDiscord on loopback, announces them on stdout (one JSON
line), then runs each phase the parent sends on stdin: it pushes the sessions' messages into the
fakes, matches every reply the daemon posts to its session's oldest message, and reports ticks
and a phase summary back as JSON lines. Nothing here imports orchestrator.
"""

from __future__ import annotations

__bench__ = False  # the child of bench/channel_throughput.py (its --quick runs this), not a bench of its own

import argparse
import asyncio
import itertools
import json
import math
import re
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/channel_platforms.py`

__all__ = ["PLATFORMS", "platforms_main"]

TICKS: Final = 10
STALL_S: Final = 60.0  # a phase with no reply for this long is reported as stuck
PLATFORMS: Final = ("telegram", "slack", "discord")


def _emit(event: str, **fields: Any) -> None:
    """Write one protocol line (child -> parent)."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _percentile(ordered: Sequence[float], share: float) -> float:
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50": _percentile(ordered, 0.50),
        "p90": _percentile(ordered, 0.90),
        "p99": _percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else math.nan,
    }


@dataclass(slots=True, eq=False)
class _Session:
    platform: str
    chat: str  # where the reply comes back to: Telegram chat id, Slack DM id, Discord channel id
    user: str
    waiting: deque[tuple[float, str]] = field(default_factory=deque)


@dataclass(slots=True, eq=False)
class _Phase:
    name: str
    closed: bool
    target: int
    rate: float = 0.0
    quota: int = 0  # closed loop: at most this many messages per session (0 = no limit)
    sent: Counter[_Session] = field(default_factory=Counter)
    issued: int = 0
    pushed: int = 0
    answered: int = 0
    mismatches: int = 0
    first_push: float | None = None
    last_push: float = 0.0
    last_reply: float = 0.0
    cpu0: float = field(default_factory=time.process_time)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PLATFORMS})
    finished: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True)
class _Tally:
    """What one fake saw: requests per method and distinct client connections (peer ports)."""

    methods: Counter[str] = field(default_factory=Counter)
    peers: set[object] = field(default_factory=set)

    def saw(self, method: str, peer: object) -> None:
        self.methods[method] += 1
        self.peers.add(peer)


class _Driver:
    """Pushes messages into the fakes and matches each reply to its session's oldest message."""

    def __init__(self, sessions: list[_Session], push: Mapping[str, Callable[[_Session, str], Any]]) -> None:
        self.sessions = sessions
        self._by_chat = {(s.platform, s.chat): s for s in sessions}
        self._push = push
        self._queues: dict[str, asyncio.Queue[_Session]] = {p: asyncio.Queue() for p in PLATFORMS}
        self._texts = itertools.count()
        self.phase: _Phase | None = None
        self.strays = 0
        self.tallies = {p: _Tally() for p in PLATFORMS}
        self.fakes: tuple[Any, Any, Any] = (None, None, None)

    async def run_pushers(self) -> None:
        async with asyncio.TaskGroup() as group:
            for name in PLATFORMS:
                group.create_task(self._pusher(name))

    async def _pusher(self, name: str) -> None:
        queue, push = self._queues[name], self._push[name]
        while True:
            session = await queue.get()
            phase = self.phase
            text = f"m{next(self._texts)}"
            now = time.perf_counter()
            session.waiting.append((now, text))
            if phase is not None:
                if phase.first_push is None:
                    phase.first_push = now
                phase.last_push = now
                phase.pushed += 1
            result = push(session, text)
            if asyncio.iscoroutine(result):
                await result

    def issue(self, session: _Session) -> None:
        assert self.phase is not None
        self.phase.issued += 1
        self.phase.sent[session] += 1
        self._queues[session.platform].put_nowait(session)

    def reply(self, platform_name: str, chat: str, text: str) -> None:
        """Called by a fake's handler when the daemon posts a message."""
        now = time.perf_counter()
        session = self._by_chat.get((platform_name, chat))
        phase = self.phase
        if session is None or not session.waiting or phase is None:
            self.strays += 1
            return
        sent, expected = session.waiting.popleft()
        if text != f"re: {expected}":
            phase.mismatches += 1
        phase.latencies[platform_name].append(now - sent)
        phase.answered += 1
        phase.last_reply = now
        if phase.closed and phase.issued < phase.target and (not phase.quota or phase.sent[session] < phase.quota):
            self.issue(session)
        step = max(1, phase.target // TICKS)
        if phase.answered % step == 0 and phase.answered < phase.target:
            _emit("tick", phase=phase.name, answered=phase.answered, elapsed=now - (phase.first_push or now))
        if phase.answered >= phase.target:
            phase.finished.set()

    async def run_phase(self, phase: _Phase) -> dict[str, Any]:
        self.phase = phase
        for tally in self.tallies.values():
            tally.methods.clear()
            tally.peers.clear()
        async with asyncio.TaskGroup() as group:
            if phase.closed:
                for session in self.sessions[: phase.target]:
                    self.issue(session)
            else:
                pacer = group.create_task(self._pace(phase))
            watched = 0
            while not phase.finished.is_set():
                try:
                    await asyncio.wait_for(phase.finished.wait(), STALL_S)
                except TimeoutError:
                    if phase.answered == watched:
                        break  # stuck: report what arrived
                    watched = phase.answered
            if not phase.closed:
                pacer.cancel()
        first = phase.first_push or phase.last_reply
        everything = [x for samples in phase.latencies.values() for x in samples]
        return {
            "phase": phase.name,
            "target": phase.target,
            "answered": phase.answered,
            "lost": phase.pushed - phase.answered,
            "mismatches": phase.mismatches,
            "strays": self.strays,
            "wall_s": phase.last_reply - first,
            "offered_rate": (phase.pushed - 1) / (phase.last_push - first) if phase.last_push > first else 0.0,
            "latency": _summary(everything),
            "by_platform": {p: _summary(v) for p, v in phase.latencies.items()},
            "fake_cpu_s": time.process_time() - phase.cpu0,
            "requests": {p: dict(t.methods) for p, t in self.tallies.items()},
            "connections": {p: len(t.peers) for p, t in self.tallies.items()},
        }

    async def _pace(self, phase: _Phase) -> None:
        start = time.perf_counter()
        count = len(self.sessions)
        for k in range(phase.target):
            delay = start + k / phase.rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            self.issue(self.sessions[k % count])


def _fake_classes(driver_ref: list[_Driver]) -> tuple[type[Any], type[Any], type[Any]]:
    """Subclass the test fakes so each reply reaches the driver and records stay bounded."""
    from tests.fakes.discord_api import FakeDiscord
    from tests.fakes.slack_api import FakeSlack
    from tests.fakes.telegram_api import FakeTelegram

    def peer(request: Any) -> object:
        return request.transport.get_extra_info("peername") if request.transport is not None else None

    class Telegram(FakeTelegram):
        async def _answer(self, request: Any, call: Any) -> Any:
            driver = driver_ref[0]
            driver.tallies["telegram"].saw(call.method, peer(request))
            response = await super()._answer(request, call)
            if call.method == "sendMessage" and response.status == 200:
                driver.reply("telegram", str(call.payload["chat_id"]), call.payload["text"])
            if len(self.requests) > 1000:  # the fake records every call; 20,000 turns add up
                del self.requests[:-100]
                self._messages.clear()
            return response

    class Slack(FakeSlack):
        async def _web_api(self, request: Any) -> Any:
            driver_ref[0].tallies["slack"].saw(request.match_info["method"], peer(request))
            response = await super()._web_api(request)
            if len(self.requests) > 1000:
                del self.requests[:-100]
                del self.posted[:-100]
                del self.acked[:-100]
            return response

        async def _post_message(self, args: dict[str, Any]) -> Any:
            response = await super()._post_message(args)
            driver_ref[0].reply("slack", str(args["channel"]), str(args.get("text", "")))
            return response

    class Discord(FakeDiscord):
        _MESSAGES = re.compile(r"/channels/(\d+)/(messages|typing)")

        async def _answer(self, request: Any, path: str, body: Any, files: Any) -> Any:
            driver = driver_ref[0]
            match = self._MESSAGES.fullmatch(path)
            driver.tallies["discord"].saw(f"{request.method} {match[2] if match else path}", peer(request))
            response = await super()._answer(request, path, body, files)
            if match and match[2] == "messages" and request.method == "POST" and response.status == 200:
                driver.reply("discord", match[1], body.get("content", ""))
            if len(self.requests) > 1000:
                del self.requests[:-100]
                del self.created_messages[:-100]
                del self._bot_messages[:-100]
                del self.typing[:-100]
                if self._current is not None:  # replayed only on RESUME, which this run never does
                    del self._current.events[:-100]
            return response

    return Telegram, Slack, Discord


def _sessions(count: int) -> list[_Session]:
    """Split `count` sessions over the platforms, interleaved so round-robin mixes them."""
    per = {p: count // 3 + (1 if i < count % 3 else 0) for i, p in enumerate(PLATFORMS)}
    made: dict[str, list[_Session]] = {
        "telegram": [_Session("telegram", str(5_000_000 + i), str(5_000_000 + i)) for i in range(per["telegram"])],
        "slack": [_Session("slack", f"D{i:08d}", f"U{i:08d}") for i in range(per["slack"])],
        "discord": [
            _Session("discord", str(400_000_000_000_000_000 + i), str(500_000_000_000_000_000 + i))
            for i in range(per["discord"])
        ],
    }
    return [s for group in itertools.zip_longest(*made.values()) for s in group if s is not None]


async def platforms_main(sessions: int) -> None:
    """The child process: serve the three fakes, then run the phases the parent asks for."""
    from tests.fakes.slack_api import message_event

    driver_ref: list[_Driver] = []
    telegram_cls, slack_cls, discord_cls = _fake_classes(driver_ref)
    async with telegram_cls() as tg, slack_cls() as slack, discord_cls() as dc:

        def push_telegram(session: _Session, text: str) -> None:
            tg.push_message(int(session.chat), int(session.user), text)

        async def push_slack(session: _Session, text: str) -> None:
            await slack.push_event(message_event(text, user=session.user, channel=session.chat))

        async def push_discord(session: _Session, text: str) -> None:
            await dc.push_message(int(session.chat), int(session.user), text)

        driver = _Driver(_sessions(sessions), {"telegram": push_telegram, "slack": push_slack, "discord": push_discord})
        driver.fakes = (tg, slack, dc)
        driver_ref.append(driver)
        async with asyncio.TaskGroup() as group:
            pushers = group.create_task(driver.run_pushers())
            await _serve_commands(driver)
            pushers.cancel()


async def _serve_commands(driver: _Driver) -> None:
    """Announce the fakes, then run each phase the parent asks for until `quit` or EOF."""
    tg, slack, dc = driver.fakes
    _emit(
            "listening",
        telegram={"url": tg.api_base_url, "token": tg.token},
        slack={"url": slack.api_base_url, "bot_token": slack.bot_token, "app_token": slack.app_token},
        discord={"url": dc.api_base_url, "gateway": dc.gateway_url, "token": dc.token},
        sessions={p: sum(s.platform == p for s in driver.sessions) for p in PLATFORMS},
    )
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = json.loads(line)
        if command["cmd"] == "quit":
            break
        phase = _Phase(
            name=command["phase"], closed=command["mode"] == "closed", target=command["turns"],
            rate=command.get("rate", 0.0), quota=command.get("quota", 0),
        )
        _emit("done", **await driver.run_phase(phase))


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, required=True)
    asyncio.run(platforms_main(parser.parse_args().sessions))


if __name__ == "__main__":
    cli()
