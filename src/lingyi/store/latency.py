"""A verification's latency as the index stores it: the value, its histogram bucket, its ns.

Kept here (not in :mod:`lingyi.stats`) because the index computes the bucket once, when a
record enters it, and the stats' histogram (:mod:`lingyi.stats.histogram`) counts the
stored buckets: both must bucket a latency the same way.
"""

from __future__ import annotations

import math

GROWTH = 1.01  # bucket i holds [GROWTH**i, GROWTH**(i+1)) ms
LOW, HIGH = -700, 2100  # 1 µs to ~1.2e9 ms
_LOG_G = math.log(GROWTH)
# Sums of ns beyond this are kept as text (SQLite's integers are 64-bit; a window's sum of
# values below 2**40 stays within them for millions of records).
SMALL_NS = 1 << 40


def finite_ms(value: object) -> float | None:
    """A latency in ms, or None: not a number (bool, text), NaN, infinite or absurdly big."""
    if value.__class__ not in (int, float):  # not bool
        return None
    try:
        ms = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return ms if -1e300 < ms < 1e300 else None  # also False for NaN


def bucket_of(ms: float) -> int | None:
    """The bucket of ``ms``; None for the zero bucket (below 1 µs)."""
    if ms < 0.001:
        return None
    index = math.floor(math.log(ms) / _LOG_G)
    return min(max(index, LOW), HIGH)


def latency_columns(value: object) -> tuple[float | None, int | None, int | str | None]:
    """The ``ms``, ``bucket`` and ``ns`` columns of a record's ``latency_ms`` (all None when
    it is not a latency; ``ns`` as text when too big for a sum of SQLite integers)."""
    ms = finite_ms(value)
    if ms is None:
        return None, None, None
    ns = round(ms * 1_000_000)
    return ms, bucket_of(ms), ns if -SMALL_NS < ns < SMALL_NS else str(ns)
