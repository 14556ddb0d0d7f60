"""Measure how far a turn can pass its token budget: before (no output cap) and now (`max_tokens`).

Run from the repository root::

    .venv/bin/python bench/budget_overshoot.py [--turns N] [--seed S]

One process, loopback only. Each turn has a random `max_tokens_per_turn` (1,000 to 20,000),
makes 0 to 4 `list_dir` calls, then the model writes a long answer (1,000 to 60,000 tokens
if nothing stops it). The fake OpenAI server counts tokens as characters / 4 of the whole
JSON it is sent (roles, ids, tool specs: more than the engine's estimate, which counts
content only) and stops at the request's `max_tokens` as a real server does.

"before" is what the same calls would have used with no output cap (the answer written
whole: the turn's tokens up to the last call, plus its input, plus the whole answer);
"now" is what the turn really used. Both are printed past the budget, in tokens and as a
share of the budget, with p50 / p99 / max over the turns; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # for tests.fakes when run as `python bench/budget_overshoot.py`

from orchestrator.checks import load_config  # noqa: E402
from orchestrator.engine import Transcript, run_tool_call_loop  # noqa: E402
from orchestrator.seam import ConstructionPath, Services, resolve  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call  # noqa: E402

CONFIG: Final = """\
[daemon]
state_dir = "{state}"

[providers.fake]
base_url = "{url}"
max_retries = 0
max_output_tokens = 100000

[agents.a]
provider = "fake"
model = "m"
autonomy = "full"
tools = ["list_dir"]
system_prompt = "You are a benchmark agent that writes long answers."

[agents.a.budget]
max_tool_iterations = 10
max_tokens_per_turn = {budget}
"""


def _percentiles(values: list[int]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {p50:>8.0f}  p99 {p99:>8.0f}  max {ordered[-1]:>8.0f}"


async def _turn(fake: FakeOpenAI, folder: Path, rng: random.Random, n: int) -> tuple[int, int, int]:
    budget = rng.randint(1_000, 20_000)
    calls = rng.randint(0, 4)
    answer_tokens = rng.randint(1_000, 60_000)
    state = folder / f"t{n}"
    path = folder / f"config-{n}.toml"
    path.write_text(CONFIG.format(state=state, url=fake.base_url, budget=budget), encoding="utf-8")
    config = load_config(path)
    whole: list[int] = []  # the uncapped answer's tokens, per request

    def respond(body: dict[str, Any]) -> Reply:
        asked = len(fake.requests)
        if asked <= calls:
            whole.append(0)
            return tool_call("list_dir", {})
        whole.append(answer_tokens)
        return text("word " * (answer_tokens * 4 // 5))

    first = len(fake.requests)
    fake.default = respond
    services = Services()
    try:
        execution = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
        result = await run_tool_call_loop(execution, Transcript(session=f"s{n}"), "write it all", actor="bench")
    finally:
        await services.providers.aclose()
    usages = fake.usages[first:]
    now = result.tokens
    if whole and whole[-1]:  # the last request was the long answer: what it would have cost whole
        before = sum(u["total_tokens"] for u in usages[:-1]) + usages[-1]["prompt_tokens"] + whole[-1]
    else:
        before = now
    return budget, before - budget, now - budget


async def _run(turns: int, seed: int) -> None:
    rng = random.Random(seed)
    before: list[int] = []
    now: list[int] = []
    share_before: list[int] = []
    share_now: list[int] = []
    async with FakeOpenAI() as fake:
        with tempfile.TemporaryDirectory() as folder:
            for n in range(turns):
                fake.requests.clear()
                fake.usages.clear()
                budget, over_before, over_now = await _turn(fake, Path(folder), rng, n)
                before.append(max(0, over_before))
                now.append(max(0, over_now))
                share_before.append(round(100 * max(0, over_before) / budget))
                share_now.append(round(100 * max(0, over_now) / budget))
    print(f"{turns} turns, budgets 1,000-20,000 tokens, answers 1,000-60,000 tokens, 0-4 tool calls first")
    print(f"tokens past the budget  before (no cap): {_percentiles(before)}")
    print(f"tokens past the budget  now (max_tokens): {_percentiles(now)}")
    print(f"% of the budget         before (no cap): {_percentiles(share_before)}")
    print(f"% of the budget         now (max_tokens): {_percentiles(share_now)}")
    print(f"turns past the budget   before {sum(1 for v in before if v)} / now {sum(1 for v in now if v)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(turns=10)
    args = parser.parse_args()
    asyncio.run(_run(args.turns, args.seed))


if __name__ == "__main__":
    main()
