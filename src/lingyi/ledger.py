"""The per-session evidence ledger: what tools really returned.

Verification checks assertions against this record, never against the assertion's own
word. Entries are added only by the server after a tool really ran (or by replay from a
transcript's ``tool_result`` events).

Bounded (:class:`LedgerLimits`, from the config's ``[ledger]``): a session keeps at most
``max_entries`` tool results (when full, it forgets the older half), none older than
``max_age_s``; a session is dropped when its
client ends it (:meth:`Ledger.drop`), after ``idle_s`` without a call, or, beyond
``max_sessions``, the one idle longest. Everything forgotten is counted (:meth:`Ledger.stats`).
A ledger without limits (replay, the CLI) keeps everything, as a transcript is finite.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, Field

from lingyi._ids import utc_now
from lingyi.models import Evidence


class LedgerEntry(BaseModel):
    session: str
    member: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    ts: str = Field(default_factory=utc_now)


class SessionLedger:
    """Evidence of one session, indexed by id and URL."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []
        self.by_id: dict[str, tuple[Evidence, LedgerEntry]] = {}
        self.urls: set[str] = set()

    def add(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)
        for item in entry.evidence:
            self.by_id[item.id] = (item, entry)
            if item.url:
                self.urls.add(item.url)

    def has(self, evidence_id: str) -> bool:
        return evidence_id in self.by_id

    def from_tools(self, tools: set[str] | None = None) -> Iterator[Evidence]:
        """Evidence produced by the given tools (all tools when None), oldest first."""
        for entry in self.entries:
            if tools is None or entry.tool in tools:
                yield from entry.evidence


# Why a session was dropped: its client ended it, it idled out, the ledger was full (it was
# the one idle longest), or it was one stateless request's.
DROP_REASONS = ("ended", "idle", "full", "request")


@dataclass(frozen=True)
class LedgerLimits:
    """How much the ledger keeps; None: no bound of that kind."""

    max_entries: int | None = None  # tool results per session
    max_age_s: float | None = None  # age of a tool result
    idle_s: float | None = None  # a session with no call for this long is dropped
    max_sessions: int | None = None  # beyond it, the session idle longest is dropped


class Ledger:
    """All sessions' evidence. Thread-safe for one writer and many readers."""

    def __init__(
        self, limits: LedgerLimits | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._sessions: dict[str, SessionLedger] = {}
        self._lock = threading.Lock()
        self.limits = limits or LedgerLimits()
        self._bounded = self.limits != LedgerLimits()
        self._clock = clock
        self._used: OrderedDict[str, float] = OrderedDict()  # session → last call, oldest first
        self._stamps: dict[str, list[float]] = {}  # session → when each entry was recorded
        self._swept = clock()
        self.counts: Counter[str] = Counter()  # what was forgotten, and why

    def record(
        self,
        session: str,
        member: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        evidence: list[Evidence] | None = None,
    ) -> LedgerEntry:
        entry = LedgerEntry(
            session=session,
            member=member,
            tool=tool,
            arguments=arguments or {},
            evidence=evidence or [],
        )
        with self._lock:
            self._sessions.setdefault(session, SessionLedger()).add(entry)
            self._bound(session, entry)
        return entry

    def session(self, session: str) -> SessionLedger:
        self._upkeep(session)
        return self._sessions.get(session) or SessionLedger()

    def entries_by(self, member: str) -> Iterator[LedgerEntry]:
        """Every session's entries produced by ``member``: evidence of that member's work."""
        for ledger in list(self._sessions.values()):
            yield from (e for e in ledger.entries if e.member == member)

    # --- bounds: limits, ages, dropped sessions, counters ------------------------------------

    def drop(self, session: str, reason: str = "ended") -> bool:
        """Forget ``session`` (its client ended it, or it idled out); True when it was held."""
        with self._lock:
            return self._drop(session, reason)

    def sweep(self) -> int:
        """Drop every session idle longer than ``idle_s``; how many were dropped."""
        with self._lock:
            return self._sweep(self._clock())

    def stats(self) -> dict[str, Any]:
        """What the ledger holds and what it forgot, for ``verification_stats``."""
        with self._lock:
            entries = sum(len(s.entries) for s in self._sessions.values())
            counts, held = Counter(self.counts), len(self._sessions)
        return {
            "sessions": held,
            "entries": entries,
            "sessions_opened": counts["opened"],
            "sessions_dropped": {r: counts[f"session.{r}"] for r in DROP_REASONS},
            "entries_forgotten": {r: counts[f"entry.{r}"] for r in ("max_entries", "max_age")},
            "limits": asdict(self.limits),
        }

    def _bound(self, session: str, entry: LedgerEntry) -> None:
        """After a record (under the lock): stamp it, mark the session used, apply limits."""
        now = self._clock()
        if session not in self._used:
            self.counts["opened"] += 1
        self._stamps.setdefault(session, []).append(now)
        self._touch(session, now)
        self._trim(session, now)
        limit = self.limits.max_sessions
        while limit is not None and len(self._sessions) > limit:
            self._drop(next(iter(self._used)), "full")
        if now - self._swept >= self._sweep_every():
            self._sweep(now)

    def _upkeep(self, session: str) -> None:
        """Before a read: the session is in use, and its expired evidence is gone."""
        if not self._bounded:
            return  # nothing to keep up
        with self._lock:
            if session in self._sessions:
                now = self._clock()
                self._touch(session, now)
                self._trim(session, now)

    def _touch(self, session: str, now: float) -> None:
        self._used[session] = now
        self._used.move_to_end(session)

    def _trim(self, session: str, now: float) -> None:
        """Forget the session's entries beyond ``max_entries`` and older than ``max_age_s``;
        rebuilt through ``add`` so that every index the session keeps stays consistent."""
        stamps = self._stamps.get(session, [])
        held, cut = len(stamps), self._expired(stamps, now)
        keep, limit = held, self.limits.max_entries
        if limit is not None and held > limit:
            # Forget the older half: the rebuild (every add again) then runs once per half of
            # the limit, about one add per record, instead of a full rebuild per record.
            keep = max(1, limit // 2)
        start = max(cut, held - keep)
        if start == 0:
            return
        self.counts["entry.max_age"] += cut
        self.counts["entry.max_entries"] += start - cut
        fresh = SessionLedger()
        for entry in self._sessions[session].entries[start:]:
            fresh.add(entry)
        self._sessions[session], self._stamps[session] = fresh, stamps[start:]

    def _expired(self, stamps: list[float], now: float) -> int:
        """How many of the oldest entries are older than ``max_age_s`` (stamps are in order)."""
        if not self.limits.max_age_s or not stamps or now - stamps[0] <= self.limits.max_age_s:
            return 0
        return bisect.bisect_right(stamps, now - self.limits.max_age_s)

    def _drop(self, session: str, reason: str) -> bool:
        self._used.pop(session, None)
        self._stamps.pop(session, None)
        if self._sessions.pop(session, None) is None:
            return False
        self.counts[f"session.{reason}"] += 1
        return True

    def _sweep(self, now: float) -> int:
        self._swept = now
        if self.limits.idle_s is None:
            return 0
        stale = []
        for session, used in self._used.items():  # least recently used first
            if now - used <= self.limits.idle_s:
                break
            stale.append(session)
        return sum(self._drop(s, "idle") for s in stale)

    def _sweep_every(self) -> float:
        # Idle sessions are looked for a few times per idle period, at most once a second.
        return max(1.0, (self.limits.idle_s or float("inf")) / 10)
