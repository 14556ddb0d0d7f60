"""Tallies: counters and histograms kept as plain numbers on the hot path, exported at scrape time.

A turn adds to a dict entry (no lock, no label lookup: the daemon runs on one event loop);
`TallyCollector` turns the tallies into Prometheus families only when `/metrics` is read.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["Counts", "Durations", "KindCounts", "TallyCollector"]


class Counts:
    """A counter family: one number per label tuple."""

    __slots__ = ("labels", "name", "help", "values")

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, key: tuple[str, ...], amount: float = 1.0) -> None:
        """Add `amount` to the series `key` (label values in `labels` order)."""
        self.values[key] = self.values.get(key, 0.0) + amount

    def family(self) -> Metric:
        """Return the family as a scrape shows it (`<name>_total`)."""
        family = CounterMetricFamily(self.name, self.help, labels=self.labels)
        for key, value in sorted(self.values.items()):
            family.add_metric(key, value)
        return family


class KindCounts:
    """A counter family whose last label is one of a few fixed kinds: per series, one number per kind.

    A call adds to every kind with one lookup (`cells`); a kind after the first two is shown
    only once it is above zero (a counter never goes back to zero, so a series never vanishes).
    """

    __slots__ = ("help", "kinds", "labels", "name", "series")

    def __init__(self, name: str, help_text: str, labels: Sequence[str], kinds: Sequence[str]) -> None:
        self.name, self.help, self.labels, self.kinds = name, help_text, tuple(labels), tuple(kinds)
        self.series: dict[tuple[str, ...], list[float]] = {}

    def cells(self, key: tuple[str, ...]) -> list[float]:
        """Return the series `key`'s numbers, one per kind in `kinds` order, to add to."""
        cells = self.series.get(key)
        if cells is None:
            cells = self.series[key] = [0.0] * len(self.kinds)
        return cells

    def family(self) -> Metric:
        """Return the family as a scrape shows it (`<name>_total`, the kind as the last label)."""
        family = CounterMetricFamily(self.name, self.help, labels=(*self.labels, "kind"))
        for key, cells in sorted(self.series.items()):
            for index, (kind, value) in enumerate(zip(self.kinds, cells, strict=True)):
                if index < 2 or value:
                    family.add_metric((*key, kind), value)
        return family


class Durations:
    """A histogram family: per label tuple, the count in each bucket (not cumulative) and the sum."""

    __slots__ = ("buckets", "labels", "name", "help", "series")

    def __init__(self, name: str, help_text: str, labels: Sequence[str], buckets: Sequence[float]) -> None:
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self.buckets = tuple(buckets)
        # per series: [count in bucket 0, ..., count above the last bound, sum]
        self.series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, key: tuple[str, ...], seconds: float) -> None:
        """Count one observation of `seconds` in the series `key`."""
        cells = self.series.get(key)
        if cells is None:
            cells = self.series[key] = [0.0] * (len(self.buckets) + 2)
        cells[bisect.bisect_left(self.buckets, seconds)] += 1
        cells[-1] += seconds

    def family(self) -> Metric:
        """Return the family with cumulative buckets, as Prometheus expects them."""
        family = HistogramMetricFamily(self.name, self.help, labels=self.labels)
        bounds = [*(_bound(b) for b in self.buckets), "+Inf"]
        for key, cells in sorted(self.series.items()):
            running, buckets = 0.0, []
            for bound, count in zip(bounds, cells[:-1], strict=True):
                running += count
                buckets.append((bound, running))
            family.add_metric(list(key), buckets, cells[-1])
        return family


def _bound(value: float) -> str:
    return "+Inf" if math.isinf(value) else repr(float(value))


class TallyCollector(Collector):
    """Exports the tallies it was given on each scrape."""

    def __init__(self, tallies: Sequence[Counts | Durations | KindCounts]) -> None:
        self._tallies = tuple(tallies)

    def describe(self) -> list[Metric]:
        """Return nothing: the series are known only at collection."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield every tally as its Prometheus family."""
        for tally in self._tallies:
            yield tally.family()
