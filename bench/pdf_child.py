"""Measure what the confined parser child adds to one PDF: the child against pypdf in this process.

Run from the repository root::

    .venv/bin/python bench/pdf_child.py [--runs N] [--gap-s S]

Each run reads the one-page sample PDF the media tests use, once with pypdf in this process
(imported before timing, as the daemon would have it) and once through `extract_pdf_text`
(the confined child, under each sandbox kind this host has), interleaved so load hits both
alike. Documents arrive `--gap-s` apart (default 0.5 s), time for the spare started after
the previous one to be ready, as uploads do; `--gap-s 0` shows back-to-back documents
(each then waits for its spare's start). The first document of each kind (no spare yet) is
reported apart, and so is what starting a spare holds the event loop for (after the document's
answer). Prints p50/p95 and what the child adds at p50; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loguru import logger  # noqa: E402

from orchestrator.media import ParserLimits, confined  # noqa: E402
from orchestrator.media.pdf import extract_pdf_text  # noqa: E402
from orchestrator.policy import SandboxKind  # noqa: E402
from orchestrator.tools import bwrap_error, landlock_error  # noqa: E402
from tests.media.samples import PDF, PDF_TEXT  # noqa: E402


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _in_process(path: Path) -> str:
    import pypdf

    reader = pypdf.PdfReader(path)
    return "".join(page.extract_text() or "" for page in reader.pages)


async def main(runs: int, gap_s: float) -> None:
    logger.remove()  # one INFO line per document is the daemon's, not the bench's
    kinds: list[SandboxKind] = ["none"]
    kinds += [kind for kind, error in (("landlock", landlock_error(False)), ("bwrap", bwrap_error())) if error is None]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sample.pdf"
        path.write_bytes(PDF)
        assert PDF_TEXT in _in_process(path)  # imports pypdf here, untimed
        timings: dict[str, list[float]] = {"in-process": [], **{kind: [] for kind in kinds}}
        first: dict[str, float] = {}
        for kind in kinds:
            limits = ParserLimits(sandbox=kind, timeout_s=30, cpu_seconds=20, memory_bytes=512 * 2**20)
            start = time.perf_counter()
            text = await extract_pdf_text(path, limits)
            first[kind] = (time.perf_counter() - start) * 1000
            assert text is not None and PDF_TEXT in text
        for _ in range(runs):
            await asyncio.sleep(gap_s)
            start = time.perf_counter()
            _in_process(path)
            timings["in-process"].append((time.perf_counter() - start) * 1000)
            for kind in kinds:
                limits = ParserLimits(sandbox=kind, timeout_s=30, cpu_seconds=20, memory_bytes=512 * 2**20)
                await asyncio.sleep(gap_s)
                start = time.perf_counter()
                text = await extract_pdf_text(path, limits)
                timings[kind].append((time.perf_counter() - start) * 1000)
                assert text is not None and PDF_TEXT in text
        spawns: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(10):  # what starting the next spare holds the loop for, after a document
            for kind in kinds:
                start = time.perf_counter()
                confined._spawn_pdf((kind, 20, 512 * 2**20), max_pages=500, max_chars=500_000).close()
                spawns[kind].append((time.perf_counter() - start) * 1000)
    base = statistics.median(timings["in-process"])
    print(f"one-page PDF, {runs} runs, documents {gap_s:g} s apart")
    for name, samples in timings.items():
        extra = "" if name == "in-process" else (
            f"  adds {statistics.median(samples) - base:6.2f} ms at p50; first document (no spare) {first[name]:.1f} ms"
        )
        print(f"  {name:10s} p50 {statistics.median(samples):7.2f} ms  p95 {_percentile(samples, 0.95):7.2f} ms{extra}")
    for kind, samples in spawns.items():
        print(f"  starting a spare ({kind}) holds the loop p50 {statistics.median(samples):.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--gap-s", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(runs=2, gap_s=0.05)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.gap_s))
