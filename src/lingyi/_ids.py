"""Time-sortable ids (ULID layout) and RFC 3339 UTC timestamps."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32, as ULID uses
_lock = threading.Lock()
_last = (0, 0)


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_id() -> str:
    """A 26-character id that sorts by creation time, monotonic within a process."""
    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big")
        if ms <= _last[0]:  # same millisecond: keep order by incrementing
            ms, rand = _last[0], _last[1] + 1
        _last = (ms, rand)
    return _encode(ms, 10) + _encode(rand, 16)


def utc_now() -> str:
    """Now as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T20:36:37.123Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
