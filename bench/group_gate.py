"""Measure what the group gate costs per message: resolving the route's gate and deciding.

Run from the repository root::

    .venv/bin/python bench/group_gate.py [--repeat N]

What `admit` does for every group message a route matches: `resolve_group_gate(config, route)`
(a route with 3 wake words, a Discord channel with the deprecated `mention_only`, the default)
then `GroupGate.decide` on the facts the adapter reported (chatter, a mention, a wake word, a
long chatter message). Prints microseconds per message (p50, p99); the target is under 20 us.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tomllib
from typing import Any

from orchestrator.config import Config
from orchestrator.seam import resolve_group_gate

_TOML = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[agents.ops]
provider = "p"
model = "m"
[channels.tg]
kind = "telegram"
token = "env:TG"
[channels.dc]
kind = "discord"
token = "env:DC"
mention_only = true
[[routes]]
channel = "tg"
agent = "ops"
senders = ["*"]
wake_words = ["ops", "hey ops", "computer"]
[[routes]]
channel = "dc"
agent = "ops"
senders = ["*"]
[[routes]]
channel = "tg"
agent = "ops"
chat = "-100*"
senders = ["*"]
"""

_FACTS: dict[str, dict[str, Any]] = {
    "chatter": {"mentions_bot": False, "reply_to_bot": False, "command_target": None, "text": "lunch at noon, anyone?"},
    "mention": {"mentions_bot": True, "reply_to_bot": False, "command_target": None, "text": "what time is it?"},
    "wake word": {"mentions_bot": False, "reply_to_bot": False, "command_target": None, "text": "Hey ops, deploy"},
    "4k chatter": {"mentions_bot": False, "reply_to_bot": False, "command_target": None, "text": "blah " * 800},
}


def main() -> None:
    """Print the gate's cost per message for each route and kind of message."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (tests/test_benches.py)")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(repeat=200)
    repeat = parser.parse_args().repeat
    config = Config.model_validate(tomllib.loads(_TOML))
    print(f"{'route':<22} {'message':<11} {'p50 us':>8} {'p99 us':>8}")
    for label, route in zip(("wake words", "legacy mention_only", "default"), config.routes):
        for kind, facts in _FACTS.items():
            each = []
            for _ in range(repeat):
                start = time.perf_counter()
                resolve_group_gate(config, route).decide(is_direct=False, **facts)
                each.append((time.perf_counter() - start) * 1e6)
            cuts = statistics.quantiles(each, n=100)
            print(f"{label:<22} {kind:<11} {cuts[49]:>8.2f} {cuts[98]:>8.2f}")
    print(f"gate decisions measured: {3 * len(_FACTS) * repeat:,}")


if __name__ == "__main__":
    main()
