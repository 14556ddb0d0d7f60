"""Measure the link-proof workspace layer's overhead per operation against plain path calls.

Run from the repository root::

    .venv/bin/python bench/workspace_io.py [--runs N]

For each operation the layer does (open for reading, create, mkdir, rename) it times the
`WorkspaceDir` method, with `openat2` and with the component walk, beside the plain call a
daemon would make by path (`os.open`, `Path.mkdir`, `os.rename`), on a path three folders
deep (`uploads/<date>/<name>`, as the intake writes). The workspace is opened once, as the
callers do per intake or tool call; opening it is timed on its own. Medians (µs) of N
batches of 200 operations, and the ratio to the plain call; printed, never asserted. The
default clock is the process's CPU time (user and kernel: what the extra system calls
cost), which a loaded host or a slow journal does not blur; `--clock wall` for elapsed time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.workspace_io import RESOLVERS, WorkspaceDir, using_resolver  # noqa: E402

BATCH = 200
DEEP = "uploads/2026-03-04"


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
clock = time.process_time


def batch_us(step: Callable[[int], None], first: int) -> float:
    start = clock()
    for n in range(first, first + BATCH):
        step(n)
    return (clock() - start) / BATCH * 1e6


def plain_ops(root: Path) -> dict[str, Callable[[int], None]]:
    def read(n: int) -> None:  # what file_read did before the layer: open, check on the descriptor, wrap
        handle = open(os.open(root / DEEP / "file", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb")
        os.fstat(handle.fileno())
        handle.close()

    def create(n: int) -> None:
        os.close(os.open(root / DEEP / f"c{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))

    def mkdir(n: int) -> None:
        (root / DEEP / f"d{n}").mkdir(parents=True, exist_ok=True)

    def rename(n: int) -> None:
        os.rename(root / DEEP / f"c{n}", root / DEEP / f"r{n}")

    return {"open for reading": read, "create": create, "mkdir": mkdir, "rename": rename}


def layer_ops(ws: WorkspaceDir) -> dict[str, Callable[[int], None]]:
    def read(n: int) -> None:
        ws.open_read(f"{DEEP}/file").close()

    def create(n: int) -> None:
        ws.create(f"{DEEP}/c{n}").close()

    def mkdir(n: int) -> None:
        ws.make_dirs(f"{DEEP}/d{n}")

    def rename(n: int) -> None:
        ws.move(f"{DEEP}/c{n}", f"{DEEP}/r{n}")

    return {"open for reading": read, "create": create, "mkdir": mkdir, "rename": rename}


def fresh(base: Path, name: str) -> Path:
    root = base / name
    (root / DEEP).mkdir(parents=True)
    (root / DEEP / "file").write_bytes(b"x" * 1000)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: the process's CPU time, user and kernel (steady on a loaded host); wall: elapsed")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=2)
    args = parser.parse_args()
    runs = args.runs
    global clock
    clock = CLOCKS[args.clock]
    names = ("open for reading", "create", "mkdir", "rename")
    samples: dict[str, dict[str, list[float]]] = {name: {"plain": [], "openat2": [], "walk": []} for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        plain = plain_ops(fresh(base, "plain"))
        layers = {}
        for resolver in RESOLVERS:
            layers[resolver] = WorkspaceDir.open(fresh(base, resolver))
        # batches alternate between the three, so a slow moment of the disk hits all alike
        for run in range(runs + 1):
            for name in names:  # in this order: a batch renames what the create batch made
                took = {"plain": batch_us(plain[name], run * BATCH)}
                for resolver in RESOLVERS:
                    with using_resolver(resolver):
                        took[resolver] = batch_us(layer_ops(layers[resolver])[name], run * BATCH)
                if run:  # the first round warms up
                    for kind, value in took.items():
                        samples[name][kind].append(value)
        opening = statistics.median(batch_us(lambda n: WorkspaceDir.open(base / "plain").close(), 0) for _ in range(runs))
        for layer in layers.values():
            layer.close()
    results = {name: {kind: statistics.median(values) for kind, values in row.items()} for name, row in samples.items()}
    print(f"workspace_io: median µs of {args.clock} time per operation ({runs} batches of {BATCH}), path 3 folders deep")
    print(f"{'operation':<18}{'plain':>9}{'openat2':>10}{'ratio':>7}{'walk':>9}{'ratio':>7}")
    for name, row in results.items():
        print(
            f"{name:<18}{row['plain']:>9.1f}{row['openat2']:>10.1f}{row['openat2'] / row['plain']:>7.2f}"
            f"{row['walk']:>9.1f}{row['walk'] / row['plain']:>7.2f}"
        )
    print(f"{'open the root':<18}{'':>9}{opening:>10.1f}  (once per intake or tool call)")


if __name__ == "__main__":
    main()
