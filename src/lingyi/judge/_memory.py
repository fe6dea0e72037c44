"""What the judge remembers between calls: verdicts (a TTL cache) and revisions per subject.

Both are bounded (least recently used out first) and thread-safe: verifications run in
worker threads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from lingyi.judge._verdict import Verdict

SUBJECTS_KEPT = 50_000


class VerdictCache:
    """Verdicts by request key, each kept ``ttl_s`` seconds, at most ``entries`` of them."""

    def __init__(
        self, ttl_s: float, entries: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s, self.entries, self._clock = ttl_s, entries, clock
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            if found[0] <= self._clock():
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(self, key: str, verdict: Verdict) -> None:
        if self.ttl_s <= 0 or self.entries <= 0:
            return
        with self._lock:
            self._items[key] = (self._clock() + self.ttl_s, verdict)
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)


class Revisions:
    """How many times each (session, subject) was sent back, and which ones are closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()

    def count(self, session: str, subject: str) -> int:
        with self._lock:
            return self._counts.get((session, subject), 0)

    def bump(self, session: str, subject: str) -> int:
        """Count one more ``needs_revision``; the new count."""
        with self._lock:
            key = (session, subject)
            self._counts[key] = self._counts.get(key, 0) + 1
            self._counts.move_to_end(key)
            while len(self._counts) > SUBJECTS_KEPT:
                self._counts.popitem(last=False)
            return self._counts[key]
