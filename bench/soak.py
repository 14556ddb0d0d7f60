"""Soak the real daemon for an hour: does its memory or its fd count creep?

Run from the repository root (not in CI; it takes `--minutes`)::

    nice -n 19 .venv/bin/python bench/soak.py [--minutes 60] [--chats 24] [--think-s 6] \
        [--tracemalloc heap.txt]

A real `orchestrator run` child serves one Telegram channel (FakeTelegram, in this process)
routed to one supervised agent on a fake OpenAI-compatible model (FakeOpenAI, in this process
too), so the child's /proc figures are the daemon's alone. Each of `--chats` private chats
loops: think `--think-s` (+-50%), send one message of a steady mix, wait for its answer:

- talk: a streamed answer paced over ~1.2 s (drafts, then the final message);
- write: `file_write` in the workspace, which asks for approval; this bench presses the
  button (Approve, one in five Deny) a moment after the prompt appears;
- read: `file_read` (auto-approved); shell: `echo` in the sandbox (auto-approved, bwrap only);
- photo / pdf, now and then: an upload the agent takes (vision; a PDF read in its child);
- /new, now and then (its answer is not a turn).

Every `--reload-every-s` the config is rewritten (the channel's `stream_edit_interval_s`
toggled, so the channel restarts) and the daemon gets SIGHUP. Every `--sample-s` the daemon's
VmRSS (/proc/PID/status) and fd count (/proc/PID/fd) are read. At the end: the table, the
least-squares slope of RSS over the LAST HALF (KiB/min; target < 10), and answered /
duplicates / lost. `--tracemalloc FILE` runs the daemon with ORCHESTRATOR_TRACEMALLOC=FILE and
sends SIGUSR2 at each fifth of the run (see docs/operations.md): the first starts tracing, the
others append the allocation sites that grew to FILE. Its RSS figures then carry tracemalloc's
own bookkeeping and a slower daemon: take the slope from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/soak.py`

from tests.fakes.openai_server import FakeOpenAI, Reply, paced, text, tool_call  # noqa: E402
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram  # noqa: E402
from tests.media.samples import JPEG, PDF  # noqa: E402

TARGET_KIB_PER_MIN: Final = 10.0
TAG: Final = re.compile(r"\bq(\d+)\b")
SETTLE_S: Final = 90.0  # after the last message, how long the answers still outstanding may take
TURN_TIMEOUT_S: Final = 180.0  # a chat waits this long for one answer before it moves on (counted lost)

CONFIG: Final = """\
[providers.fake]
base_url = "{llm}"
max_retries = 0

[daemon]
state_dir = "{state}"
shutdown_grace_s = 20

[agents.soak]
provider = "fake"
model = "m"
system_prompt = "You are a soak-test agent."
autonomy = "supervised"
tools = ["file_write", "file_read"{shell}]
vision = true
approval.auto_approve = ["file_read", "shell"]
approval.timeout_s = 60
media.accept = ["image", "document"]
shell.allowed_commands = ["echo"]

[channels.tg]
kind = "telegram"
token = "env:SOAK_TG_TOKEN"
api_base_url = "{tg}"
poll_timeout_s = 1
format = "plain"
stream_edit_interval_s = {interval}

[[routes]]
channel = "tg"
agent = "soak"
senders = ["*"]
"""


def _answer(tag: str, kind: str) -> Reply:
    words = " ".join(f"w{i}" for i in range(30))
    return paced(text(f"re q{tag} {kind}: {words}"), over_s=1.2) if kind == "talk" else text(f"re q{tag} {kind} done")


def responder(body: dict[str, Any]) -> Reply:
    """The model: a tool call for write/read/shell messages, then (or else) the tagged answer."""
    messages = body.get("messages") or []
    user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    seen = json.dumps(user.get("content"))
    found = TAG.search(seen)
    tag = found[1] if found else "0"
    kind = next((k for k in ("write", "read", "shell", "photo", "pdf") if k in seen), "talk")
    if messages and messages[-1].get("role") == "tool":
        return _answer(tag, kind)
    if kind == "write":
        return tool_call("file_write", {"path": f"notes/q{tag}.txt", "content": f"note {tag}\n" * 20})
    if kind == "read":
        return tool_call("file_read", {"path": "notes/shared.txt"})
    if kind == "shell":
        return tool_call("shell", {"argv": ["echo", f"q{tag}"]})
    return _answer(tag, kind)


@dataclass(slots=True)
class Tally:
    sent: dict[str, str] = field(default_factory=dict)  # tag -> kind
    answers: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    waiting: dict[str, asyncio.Event] = field(default_factory=dict)
    approvals: int = 0
    denials: int = 0
    news: int = 0
    reloads: int = 0
    chats: int = 0


def fake_telegram(tally: Tally) -> FakeTelegram:
    """FakeTelegram that counts the tagged answers, presses approval buttons and keeps its records short."""

    class Telegram(FakeTelegram):
        async def _answer(self, request: Any, call: Any) -> Any:
            response = await super()._answer(request, call)
            if call.method == "sendMessage" and response.status == 200:
                payload = call.payload
                if payload.get("reply_markup") is not None:
                    asyncio.get_running_loop().call_later(0.3, self._press, int(payload["chat_id"]))
                elif (found := re.match(r"re q(\d+) ", str(payload.get("text")))) is not None:
                    tally.answers[found[1]] += 1
                    if (event := tally.waiting.pop(found[1], None)) is not None:
                        event.set()
            if len(self.requests) > 2000:  # the fake keeps every call; an hour adds up
                del self.requests[:-200]
                del self.visible[:-200]
                for mid in list(self._messages)[:-500]:
                    del self._messages[mid]
                for fid in list(self._files)[:-20]:
                    del self._files[fid]
            return response

        def _press(self, chat: int) -> None:
            prompts = [mid for mid, (_, m) in self._messages.items()
                       if "reply_markup" in m and m["chat"]["id"] == chat]
            if not prompts:
                return
            deny = random.random() < 0.2
            try:
                self.press_button(chat, "Deny" if deny else "Approve", message_id=prompts[-1])
            except LookupError:
                return  # already answered (the buttons are gone)
            if deny:
                tally.denials += 1
            else:
                tally.approvals += 1

    return Telegram()


def _kind(rng: random.Random, shell: bool) -> str:
    roll = rng.random()
    for kind, upto in (("talk", 0.40), ("write", 0.60), ("read", 0.75), ("shell", 0.85 if shell else 0.75),
                       ("photo", 0.90), ("pdf", 0.93), ("new", 0.96)):
        if roll < upto:
            return kind
    return "talk"


async def chat_loop(chat: int, tg: FakeTelegram, tally: Tally, tags: Any, args: argparse.Namespace,
                    until: float, shell: bool) -> None:
    """One chat: think, send one message of the mix, wait for its answer; until `until`.

    With `--new-chat-share`, now and then the loop moves on to a chat never seen before, as a
    daemon in service keeps meeting new users: what is kept per chat shows (and the bounded
    transcript cache filling up, so the slope is not a leak's alone).
    """
    rng = random.Random(chat)
    while time.monotonic() < until:
        await asyncio.sleep(args.think_s * rng.uniform(0.5, 1.5))
        if rng.random() < args.new_chat_share:
            chat += 1_000
            tally.chats += 1
        kind = _kind(rng, shell)
        if kind == "new":
            tg.push_message(chat, chat, "/new")
            tally.news += 1
            continue
        tag = str(next(tags))
        event = tally.waiting[tag] = asyncio.Event()
        tally.sent[tag] = kind
        tally.kinds[kind] += 1
        if kind == "photo":
            tg.push_photo(chat, chat, JPEG, caption=f"q{tag} photo: what is this?")
        elif kind == "pdf":
            tg.push_document(chat, chat, PDF, file_name=f"q{tag}.pdf", mime_type="application/pdf",
                             caption=f"q{tag} pdf: sum it up")
        else:
            tg.push_message(chat, chat, f"q{tag} {kind}: please")
        try:
            await asyncio.wait_for(event.wait(), TURN_TIMEOUT_S)
        except TimeoutError:
            tally.waiting.pop(tag, None)


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a killed bench leaves no daemon behind


def proc_figures(pid: int) -> tuple[float, int]:
    """Return the process's VmRSS in KiB and its open fd count."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return float(rss), len(os.listdir(f"/proc/{pid}/fd"))


def slope_kib_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, KiB) points, in KiB per minute."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return 60 * sum((x - mx) * (y - my) for x, y in points) / var if var else float("nan")


async def soak(args: argparse.Namespace) -> int:
    tally = Tally()
    shell = shutil.which("bwrap") is not None
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        return await _soak_in(Path(tmp), args, tally, shell)


async def _soak_in(folder: Path, args: argparse.Namespace, tally: Tally, shell: bool) -> int:
    async with FakeOpenAI(default=responder) as llm, fake_telegram(tally) as tg:
        config = folder / "config.toml"

        def write_config(interval: float) -> None:
            config.write_text(CONFIG.format(llm=llm.base_url, state=folder / "state", tg=tg.api_base_url,
                                            shell=', "shell"' if shell else "", interval=interval))

        write_config(1.0)
        workspace = folder / "state-workspaces" / "soak" / "notes"
        workspace.mkdir(parents=True)
        (workspace / "shared.txt").write_text("shared notes\n" * 50)
        env = {**os.environ, "SOAK_TG_TOKEN": DEFAULT_TOKEN, "PYTHONPATH": str(_ROOT)}  # this checkout
        if args.tracemalloc:
            env["ORCHESTRATOR_TRACEMALLOC"] = str(Path(args.tracemalloc).resolve())
        log = folder / "daemon.log"
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=sink, cwd=_ROOT, env=env,
                preexec_fn=_die_with_parent)
        try:
            async with asyncio.timeout(60):
                while b"ready:" not in log.read_bytes():
                    if proc.returncode is not None:
                        raise SystemExit(f"the daemon exited before ready:\n{log.read_text()[-3000:]}")
                    await asyncio.sleep(0.1)
            samples = await drive(args, proc, tg, tally, shell, write_config)
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if args.keep_log:
                shutil.copy(log, args.keep_log)
        text_log = log.read_text(errors="replace")
    return report(args, samples, tally, code, text_log, shell)


async def drive(args: argparse.Namespace, proc: Any, tg: FakeTelegram, tally: Tally, shell: bool,
                write_config: Any) -> list[tuple[float, float, int, int]]:
    """Run the chats, the reloads and the sampler; return (s, RSS KiB, fds, answered) samples."""
    start = time.monotonic()
    until = start + args.minutes * 60
    tags = iter(range(1, 10**9))
    samples: list[tuple[float, float, int, int]] = []
    fifths = {round(args.minutes * 60 * q / 5) for q in (1, 2, 3, 4, 5)}  # SIGUSR2: start, then dumps
    dumped: set[int] = set()

    async def sampler() -> None:
        print(f"{'min':>6} {'RSS MiB':>8} {'fds':>5} {'answered':>9} {'sent':>6}", flush=True)
        while True:
            now = time.monotonic() - start
            rss, fds = proc_figures(proc.pid)
            answered = sum(1 for t in tally.sent if tally.answers[t])
            samples.append((now, rss, fds, answered))
            print(f"{now / 60:6.1f} {rss / 1024:8.1f} {fds:5d} {answered:9d} {len(tally.sent):6d}", flush=True)
            for q in sorted(fifths - dumped):
                if args.tracemalloc and now >= q - args.sample_s / 2:
                    dumped.add(q)
                    proc.send_signal(signal.SIGUSR2)
            if now >= args.minutes * 60:
                return
            await asyncio.sleep(args.sample_s)

    async def reloader() -> None:
        interval = 1.0
        while True:
            await asyncio.sleep(args.reload_every_s)
            interval = 0.9 if interval == 1.0 else 1.0
            write_config(interval)  # a changed channel: it restarts
            proc.send_signal(signal.SIGHUP)
            tally.reloads += 1

    async with asyncio.TaskGroup() as group:
        sampling = group.create_task(sampler())
        reloading = group.create_task(reloader())
        tally.chats = args.chats
        chats = [group.create_task(chat_loop(10_000 + i, tg, tally, tags, args, until, shell))
                 for i in range(args.chats)]
        await sampling
        reloading.cancel()
        settle = time.monotonic() + SETTLE_S
        while tally.waiting and time.monotonic() < settle:
            await asyncio.sleep(0.5)
        for task in chats:
            task.cancel()
    return samples


def report(args: argparse.Namespace, samples: list[tuple[float, float, int, int]], tally: Tally, code: int,
           log: str, shell: bool) -> int:
    half = samples[len(samples) // 2:]
    slope = slope_kib_per_min([(s, rss) for s, rss, _, _ in half])
    whole = slope_kib_per_min([(s, rss) for s, rss, _, _ in samples])
    answered = sum(1 for t in tally.sent if tally.answers[t])
    duplicates = sum(n - 1 for n in tally.answers.values() if n > 1)
    lost = [t for t in tally.sent if not tally.answers[t]]
    fds = [f for _, _, f, _ in samples]
    minutes = samples[-1][0] / 60 if samples else 0.0
    print(f"""
soak: {minutes:.1f} min, {args.chats} chats, think {args.think_s:g} s; shell {'on (bwrap)' if shell else 'off (no bwrap)'}; \
tracemalloc {'ON: RSS includes its own bookkeeping' if args.tracemalloc else 'off'}
  turns sent {len(tally.sent):,} ({', '.join(f'{k} {n}' for k, n in sorted(tally.kinds.items()))}); /new {tally.news}; \
approvals pressed {tally.approvals} (deny {tally.denials}); reloads {tally.reloads}; chats {tally.chats}
  answered {answered:,}, duplicates {duplicates}, lost {len(lost)}{f' (e.g. q{lost[0]} {tally.sent[lost[0]]})' if lost else ''}
  RSS start {samples[0][1] / 1024:.1f} MiB, end {samples[-1][1] / 1024:.1f} MiB; slope whole run {whole:+.1f} KiB/min
  RSS slope of the last half ({len(half)} samples): {slope:+.1f} KiB/min (target < {TARGET_KIB_PER_MIN:g}): \
{'meets' if slope < TARGET_KIB_PER_MIN else 'MISSES'}
  fds: start {fds[0]}, min {min(fds)}, max {max(fds)}, end {fds[-1]}
  daemon exit code {code}; log: {log.count('Traceback')} tracebacks, {_lines(log, 'ERROR')} ERROR lines, \
{_lines(log, 'WARNING')} WARNING lines""")
    return 0 if code == 0 else 1


def _lines(log: str, level: str) -> int:
    return sum(1 for line in log.splitlines() if line.startswith(level) or f" {level} " in line[:40])


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--chats", type=int, default=24)
    parser.add_argument("--think-s", type=float, default=6.0, help="mean pause between a chat's answer and its next message")
    parser.add_argument("--new-chat-share", type=float, default=0.0,
                        help="share of turns that move to a new chat (default 0: the transcript cache, 2,048 "
                             "sessions, would fill all run long and hide a leak's slope)")
    parser.add_argument("--sample-s", type=float, default=30.0)
    parser.add_argument("--reload-every-s", type=float, default=180.0)
    parser.add_argument("--tracemalloc", metavar="FILE", help="run the daemon with ORCHESTRATOR_TRACEMALLOC=FILE")
    parser.add_argument("--keep-log", metavar="FILE", help="copy the daemon's stderr here at the end")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(minutes=0.25, chats=3, think_s=0.5, sample_s=2.0, reload_every_s=8.0)
    raise SystemExit(asyncio.run(soak(parser.parse_args())))


if __name__ == "__main__":
    cli()
