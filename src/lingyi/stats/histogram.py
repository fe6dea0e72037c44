"""A fixed-size latency histogram with percentiles within 0.5%.

Buckets grow by 1% and a value is reported at its bucket's geometric midpoint, so every
percentile is within 0.5% of a latency that really occurred, and memory does not depend on
how many latencies were counted. The sum behind the mean is kept in whole nanoseconds, so
the mean does not depend on the order of the additions, as a float sum would.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from lingyi.store import latency


class LatencyHistogram:
    """Log-bucket histogram of latencies in milliseconds: fixed size.

    Bucket ``i`` holds values in [GROWTH**i, GROWTH**(i+1)); indices are clamped to
    [-700, 2100] (1 µs to ~1.2e9 ms), so at most ~2800 counters exist. Values below 1 µs
    are counted as zero. A percentile is the nearest-rank bucket reported at its
    geometric midpoint and clamped to the exact min/max: relative error < 0.5%.
    """

    GROWTH = latency.GROWTH

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.zeros = 0
        self.count = 0
        self.total_ns = 0  # exact: the mean does not depend on the order values were added
        self.low = math.inf
        self.high = -math.inf

    bucket_of = staticmethod(latency.bucket_of)

    def add(self, ms: float, bucket: int | None = None, ns: int | None = None) -> None:
        """Count ``ms``; ``bucket`` and ``ns`` (``round(ms * 1e6)``) may be passed when
        already computed for ``ms`` (a latency counted in two histograms)."""
        self.count += 1
        self.total_ns += round(ms * 1_000_000) if ns is None else ns
        if ms < self.low:
            self.low = ms
        if ms > self.high:
            self.high = ms
        index = self.bucket_of(ms) if bucket is None else bucket
        if index is None:
            self.zeros += 1
        else:
            self.buckets[index] += 1

    def add_bucket(self, bucket: int | None, count: int, ns: int, low: float, high: float) -> None:
        """Count ``count`` latencies of one bucket at once (``ns``: their sum; ``low``,
        ``high``: the least and the greatest), as the index's grouped rows give them."""
        self.count += count
        self.total_ns += ns
        self.low, self.high = min(self.low, low), max(self.high, high)
        if bucket is None:
            self.zeros += count
        else:
            self.buckets[bucket] += count

    @property
    def total(self) -> float:
        """The sum of the values counted, in milliseconds."""
        return self.total_ns / 1_000_000

    def quantile(self, q: float) -> float | None:
        if self.count == 0:
            return None
        rank = max(1, math.ceil(q * self.count))  # nearest-rank definition
        if rank <= self.zeros:
            return max(self.low, 0.0)
        seen = self.zeros
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                middle = math.pow(self.GROWTH, index + 0.5)
                return min(max(middle, self.low), self.high)
        return self.high

    def summary(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        empty = self.count == 0
        return {
            "count": self.count,
            "mean": None if empty else r(self.total / self.count),
            "max": None if empty else r(self.high),
            "p50": r(self.quantile(0.50)),
            "p95": r(self.quantile(0.95)),
            "p99": r(self.quantile(0.99)),
        }
