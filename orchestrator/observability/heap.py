"""An allocation trace the daemon keeps only when asked: `ORCHESTRATOR_TRACEMALLOC=FILE`.

With the variable set, the daemon's first SIGUSR2 starts `tracemalloc` (after start-up and a
warm-up: tracing slows imports twentyfold) and each later one appends to FILE the allocation
sites that grew (after a full collection, so garbage not yet collected is not counted): by
source line since the previous dump and since tracing started, then the
biggest growths with their tracebacks (`ORCHESTRATOR_TRACEMALLOC_FRAMES` frames, default 6).
Tracing costs CPU and memory (each live block keeps its traceback), so it is a diagnostic
for a soak (bench/soak.py), never a setting of a daemon in service.
"""

from __future__ import annotations

import ctypes
import gc
import linecache
import os
import signal
import time
import tracemalloc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Final

from orchestrator.errors import OrchestratorError

__all__ = ["TRACEMALLOC_ENV", "HeapTrace", "HeapTraceSettingInvalid", "heap_trace_from_env"]

TRACEMALLOC_ENV: Final = "ORCHESTRATOR_TRACEMALLOC"
FRAMES_ENV: Final = "ORCHESTRATOR_TRACEMALLOC_FRAMES"
FRAMES: Final = 6  # frames kept per allocation: enough to see whose call made it, not too slow
TOP_LINES: Final = 25
TOP_TRACEBACKS: Final = 6
_IGNORED: Final = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, linecache.__file__),  # the dumps' own source lines
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


class HeapTraceSettingInvalid(OrchestratorError):
    """An ORCHESTRATOR_TRACEMALLOC_* variable holds a value the trace cannot use."""

    def __init__(self, *, name: str, value: str, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name}={value!r}: expected {expected}")


class HeapTrace:
    """Trace allocations from `start()` on; each `dump()` appends what grew to `path`."""

    def __init__(self, *, path: Path, frames: int = FRAMES) -> None:
        self._path = path
        self._frames = frames
        self._started_here = False
        self._first: tracemalloc.Snapshot | None = None
        self._previous: tracemalloc.Snapshot | None = None
        self._dumps = 0

    @property
    def tracing(self) -> bool:
        """Return True once `start()` ran (and until `close()`)."""
        return self._first is not None

    def start(self) -> None:
        """Start tracing and note it in the file; the first dump compares with this moment."""
        gc.collect()
        self._started_here = not tracemalloc.is_tracing()
        if self._started_here:
            tracemalloc.start(self._frames)
        self._first = self._previous = self._snapshot()
        with self._path.open("a", encoding="utf-8") as out:
            out.write(f"=== tracing started at {time.strftime('%Y-%m-%dT%H:%M:%S')} ({self._frames} frames)\n\n")

    def step(self) -> None:
        """Start tracing the first time, dump every time after (what SIGUSR2 does)."""
        if self.tracing:
            self.dump()
        else:
            self.start()

    @staticmethod
    def _snapshot() -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(_IGNORED)

    def dump(self) -> None:
        """Append the sites that grew since the previous dump (and since `start()`) to the file."""
        if self._first is None or self._previous is None:
            raise RuntimeError("HeapTrace.dump() before start()")
        full = gc.get_stats()[-1]["collections"]
        unreachable = gc.collect()  # garbage the collector has not reached yet is not growth
        now = self._snapshot()
        self._dumps += 1
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"=== dump {self._dumps} at {time.strftime('%Y-%m-%dT%H:%M:%S')}: "
                 f"traced {current / 1024:,.0f} KiB (peak {peak / 1024:,.0f} KiB); {full} full collections "
                 f"so far, this dump's found {unreachable:,} unreachable objects; {_sqlite_memory()}"]
        lines += _by_line("since the previous dump", now.compare_to(self._previous, "lineno"))
        if self._dumps > 1:
            lines += _by_line("since tracing started", now.compare_to(self._first, "lineno"))
        lines.append("--- biggest growths since the previous dump, with their tracebacks (most recent call last)")
        for stat in now.compare_to(self._previous, "traceback")[:TOP_TRACEBACKS]:
            lines.append(f"{stat.size_diff / 1024:+,.1f} KiB in {stat.count_diff:+,} blocks:")
            lines += [f"    {line}" for line in stat.traceback.format()]
        self._previous = now
        with self._path.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n\n")

    def close(self) -> None:
        """Stop tracing (if this object started it)."""
        if self._started_here:
            tracemalloc.stop()
        self._first = self._previous = None


def _sqlite_memory() -> str:
    """SQLite's own memory (not traced: its page caches fill up to `cache_size` per connection)."""
    try:
        used = ctypes.CDLL("libsqlite3.so.0").sqlite3_memory_used
    except (OSError, AttributeError):  # linked statically, or another platform
        return "SQLite memory unknown"
    used.restype = ctypes.c_int64
    return f"SQLite holds {used() / 1024:,.0f} KiB (not traced)"


def _by_line(title: str, stats: Sequence[tracemalloc.StatisticDiff]) -> list[str]:
    lines = [f"--- top {TOP_LINES} lines by growth {title}: KiB, blocks, file:line"]
    for stat in stats[:TOP_LINES]:
        frame = stat.traceback[0]
        lines.append(f"{stat.size_diff / 1024:+10,.1f} {stat.count_diff:+8,}  {frame.filename}:{frame.lineno}")
    return lines


@contextmanager
def heap_trace_from_env(environ: Mapping[str, str] = os.environ) -> Iterator[HeapTrace | None]:
    """Within the block, when `ORCHESTRATOR_TRACEMALLOC` names a file, SIGUSR2 runs `HeapTrace.step`.

    Yields None (and changes nothing) without the variable. Call it from the main thread:
    it installs the SIGUSR2 handler, and restores the previous one at the end. Raises
    `HeapTraceSettingInvalid` when `ORCHESTRATOR_TRACEMALLOC_FRAMES` is not a whole number
    from 1 to 100.
    """
    target = environ.get(TRACEMALLOC_ENV, "").strip()
    if not target:
        yield None
        return
    frames_text = environ.get(FRAMES_ENV, "").strip() or str(FRAMES)
    if not frames_text.isdigit() or not 1 <= int(frames_text) <= 100:
        raise HeapTraceSettingInvalid(name=FRAMES_ENV, value=frames_text, expected="a whole number from 1 to 100")
    trace = HeapTrace(path=Path(target), frames=int(frames_text))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        trace.step()

    previous = signal.signal(signal.SIGUSR2, on_signal)
    try:
        yield trace
    finally:
        signal.signal(signal.SIGUSR2, previous)
        trace.close()
