"""The cyclic garbage collector after start-up: what start-up loaded is frozen, the rest is collected.

`gc.freeze()` moves every object start-up made out of the collector's reach, so a full
collection no longer walks them and stalls every channel. It does not reset the count the
collector compares with before a full collection (a quarter of the objects that survived the
last one, which start-up made big). Without the `gc.collect()` after it, no full collection
ran for tens of thousands of promoted objects, and each turn's cyclic garbage that outlived
the young generations (HTTP requests and responses, tracebacks and their frames) piled up in
the meantime (bench/soak.py). Collected right after the freeze, the old
generation is empty, the count restarts from it, and the full collections that follow walk
only what came after start-up.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_start_up"]


def freeze_start_up() -> None:
    """Freeze what start-up made, then collect, so later full collections come at their usual pace."""
    gc.freeze()
    gc.collect()  # walks only the (now empty) old generation and the young ones: quick
