"""The per-session evidence ledger: what tools really returned, indexed.

Verification checks assertions against this record, never against the assertion's own
word. Entries are added only by the server after a tool really ran (or by replay from a
transcript's ``tool_result`` events).

Every lookup a check makes is an index lookup, so that its cost does not grow with the
session: evidence by id (in the one form ids are compared in, :func:`evidence_key`), URLs
by their normal form, entries by member, and evidence by the terms and numbers it holds
(bounded posting lists per tool, newest first).

Bounded (:class:`LedgerLimits`, from the config's ``[ledger]``): a session keeps at most
``max_entries`` tool results (when full, each new one makes it forget the oldest), none older than
``max_age_s``; a session is dropped when its client ends it (:meth:`Ledger.drop`), after
``idle_s`` without a call, or, beyond ``max_sessions``, the one idle longest. Everything
forgotten is counted (:meth:`Ledger.stats`). A ledger without limits (replay, the CLI) keeps
everything, as a transcript is finite.
"""

from __future__ import annotations

import bisect
import heapq
import re
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from functools import cached_property, lru_cache
from typing import Any

from lingyi._ids import utc_now
from lingyi.models import Evidence
from lingyi.text import Canonical, canonical, canonical_text, entities, extract_urls, normalize_url
from lingyi.text._lang import bigrams, words

_HEX_ID = re.compile(r"[0-9a-f]{24,40}")  # trace ids, commit SHAs
_SHORT_HEX = re.compile(r"[0-9a-f]{7,39}")
_SHA = re.compile(r"(?:[a-z]+:)?([0-9a-f]{40})")  # a SHA, or one a tool named (commit:…)


def _sha_of(key: str) -> str | None:
    """The commit SHA an evidence key holds ("4be9…", "commit:4be9…"), if it holds one."""
    found = _SHA.fullmatch(key)
    return found.group(1) if found else None


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A search query says what was asked, not what was found: it is not part of the evidence.
_ASKED = frozenset({"query", "q", "question", "prompt", "message", "content"})
POSTINGS = 256  # evidence items kept per (tool, term): the newest are the ones facts cite
PER_TERM = 64  # of which a search looks at the newest, rare terms first


def evidence_key(evidence_id: str) -> str:
    """The one form two ids are compared in.

    Canonical text (NFKC, no format characters, look-alike letters folded) in lower case;
    a trace id in UUID form is the same id as its 32 hex digits.
    """
    key = canonical_text(evidence_id).strip()
    return key.replace("-", "") if _UUID.fullmatch(key) else key


def is_hex_id(key: str) -> bool:
    return bool(_HEX_ID.fullmatch(key))


def number_key(value: Decimal) -> str:
    """How a number is indexed: '#640', '#0.874', whatever way it was written."""
    return f"#{value.normalize():f}"


@dataclass(frozen=True, eq=False)
class LedgerEntry:
    """One tool result of a session. A plain record (no validation): the server builds one per
    call from values it already checked (the evidence is typed, the arguments approved)."""

    session: str
    member: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    ts: str = field(default_factory=utc_now)


@dataclass(frozen=True, eq=False)
class Item:
    """One piece of evidence with what checks compare it on, computed once when recorded."""

    evidence: Evidence
    entry: LedgerEntry
    key: str
    seq: int  # order of recording in the session: newer evidence wins ties

    @cached_property
    def canon(self) -> Canonical:
        """Title, snippet and the arguments that say what it is about (source, version).

        Not the id: "an-rc-5" names the evidence, it states no 5.
        """
        context = " ".join(
            str(v)
            for k, v in self.entry.arguments.items()
            if k not in _ASKED and isinstance(v, str | int | float)
        )
        return canonical(f"{self.evidence.title} {self.evidence.snippet} {context}")

    @property
    def text(self) -> str:
        return self.canon.text

    def index_terms(self) -> frozenset[str]:
        """What the item can be found by: bigrams, words and number values, and its id."""
        return item_terms(self.text, self.key)


@lru_cache(maxsize=4096)
def item_terms(text: str, key: str) -> frozenset[str]:
    """An item's index terms, cached like :func:`text_terms`: the union is a copy of a few
    hundred terms, made when the item is recorded and again when it is forgotten."""
    return text_terms(text) | {key}


@lru_cache(maxsize=4096)
def text_terms(text: str) -> frozenset[str]:
    """The index terms of an evidence text: bigrams, words and number values.

    Cached: a busy session records the same knowledge-base hits again and again, and a
    trimmed session re-indexes what it keeps.
    """
    values = {number_key(v) for v in entities(text).values}
    parts = words(text.replace("_", " "))  # dataset_v3_labels is found by "dataset" too
    return frozenset(bigrams(text) | words(text) | parts | values)


class SessionLedger:
    """Evidence of one session, indexed by id, URL, member, tool and term."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []
        self.by_id: dict[str, Item] = {}  # by evidence_key
        self.urls: set[str] = set()  # normalised
        self._by_url: dict[str, list[Item]] = {}
        self._by_member: dict[str, list[LedgerEntry]] = {}
        self._by_tool: dict[str, int] = {}
        self._postings: dict[str, dict[str, deque[Item]]] = {}
        self._seq = 0
        self._hex_prefix: dict[str, list[str]] = {}  # first 7 hex digits → full ids
        self._items: dict[LedgerEntry, tuple[Item, ...]] = {}  # each entry's, to forget them
        self._entries_of: Counter[str] = Counter()  # tool → entries held
        # What kinds of input keep per session (a conclusion's revisions, an answer's attempts,
        # a task's calls): small counters and notes, dropped with the session.
        self.state: dict[str, Any] = {}

    def add(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)
        self._by_member.setdefault(entry.member, []).append(entry)
        self._by_tool[entry.tool] = self._by_tool.get(entry.tool, 0) + len(entry.evidence)
        self._entries_of[entry.tool] += 1
        postings = self._postings.setdefault(entry.tool, {})
        items = []
        for evidence in entry.evidence:
            self._seq += 1
            item = Item(evidence, entry, evidence_key(evidence.id), self._seq)
            items.append(item)
            self.by_id[item.key] = item
            if sha := _sha_of(item.key):  # a commit may be cited by a short SHA
                self._hex_prefix.setdefault(sha[:7], []).append(item.key)
            for url in evidence_urls(evidence.url, evidence.title, evidence.snippet):
                self.urls.add(url)
                self._by_url.setdefault(url, []).append(item)
            for term in item.index_terms():
                # not setdefault: that builds a deque per term even when the term has one
                if (posting := postings.get(term)) is None:
                    posting = postings[term] = deque(maxlen=POSTINGS)
                posting.appendleft(item)
        self._items[entry] = tuple(items)

    def forget(self, count: int) -> None:
        """Forget the oldest ``count`` entries from every index, in place: what a rebuild from
        the newer entries would hold, without re-adding them (no call pays a rebuild).

        Readers take no lock: lists they may be reading are replaced, never cut; a posting
        loses its oldest items from its end (read whole, with ``tuple``, in one step).
        """
        old, self.entries = self.entries[:count], self.entries[count:]
        for entry in old:
            self._forget_entry(entry)

    def _forget_entry(self, entry: LedgerEntry) -> None:
        member = self._by_member[entry.member][1:]  # the oldest of the member's entries
        self._set_or_drop(self._by_member, entry.member, member)
        postings = self._postings[entry.tool]
        for item in self._items.pop(entry):
            self._forget_item(item, postings)
        self._entries_of[entry.tool] -= 1
        self._by_tool[entry.tool] -= len(entry.evidence)
        if not self._entries_of[entry.tool]:  # no entry of the tool is left
            del self._entries_of[entry.tool], self._by_tool[entry.tool]
            del self._postings[entry.tool]

    def _forget_item(self, item: Item, postings: dict[str, deque[Item]]) -> None:
        if self.by_id.get(item.key) is item:  # else a newer item holds the id
            del self.by_id[item.key]
        if sha := _sha_of(item.key):
            short = list(self._hex_prefix[sha[:7]])
            short.remove(item.key)  # the first: the oldest
            self._set_or_drop(self._hex_prefix, sha[:7], short)
        ev = item.evidence
        for url in evidence_urls(ev.url, ev.title, ev.snippet):
            held = self._by_url[url]  # oldest first: the item is the first
            kept = held[1:] if held[0] is item else [i for i in held if i is not item]
            self._set_or_drop(self._by_url, url, kept)
            if url not in self._by_url:
                self.urls.discard(url)
        for term in item.index_terms():
            posting = postings.get(term)
            if posting and posting[-1] is item:  # else newer items pushed it out already
                posting.pop()
                if not posting:
                    del postings[term]

    @staticmethod
    def _set_or_drop(index: dict[str, Any], key: str, values: list[Any]) -> None:
        if values:
            index[key] = values
        else:
            del index[key]

    def has(self, evidence_id: str) -> bool:
        return self.get(evidence_id) is not None

    def get(self, evidence_id: str) -> Item | None:
        """The evidence with this id; a short commit SHA finds the commit it abbreviates."""
        key = evidence_key(evidence_id)
        found = self.by_id.get(key)
        if found is None and _SHORT_HEX.fullmatch(key):
            prefixed = self._hex_prefix.get(key[:7], ())
            full = next((k for k in prefixed if (_sha_of(k) or "").startswith(key)), None)
            found = self.by_id.get(full) if full else None
        return found

    def has_url(self, url: str) -> bool:
        return normalize_url(url) in self.urls

    def by_url(self, url: str) -> list[Item]:
        """The evidence a tool returned with this URL (in any of its equal forms)."""
        return list(self._by_url.get(normalize_url(url), ()))

    def tools(self) -> list[str]:
        """The tools that recorded evidence in this session."""
        return list(self._postings)

    def count_from(self, tools: Iterable[str]) -> int:
        """How many pieces of evidence the given tools returned in this session."""
        return sum(self._by_tool.get(t, 0) for t in tools)

    def entries_by(self, member: str) -> list[LedgerEntry]:
        return list(self._by_member.get(member, ()))

    def related(
        self, terms: Iterable[str], tools: Iterable[str], limit: int = 8, budget: int = 256
    ) -> list[Item]:
        """The items from ``tools`` sharing the most ``terms``, best first (newest on ties).

        Rare terms are looked at first and at most ``budget`` postings in all, so that the
        cost stays flat however large the session grows.
        """
        lists = [  # one lookup per term: the writer may forget a term meanwhile (no lock)
            posting
            for tool in tools
            if (postings := self._postings.get(tool))
            for t in set(terms)
            if (posting := postings.get(t))
        ]
        score: dict[int, int] = {}
        found: dict[int, Item] = {}
        for items in sorted(lists, key=len):
            for item in tuple(items)[: min(budget, PER_TERM)]:
                found[id(item)] = item
                score[id(item)] = score.get(id(item), 0) + 1
            budget -= min(len(items), PER_TERM)
            if budget <= 0:
                break
        best = heapq.nlargest(limit, found, key=lambda i: (score[i], found[i].seq))
        return [found[i] for i in best]

    def from_tools(self, tools: set[str] | None = None) -> Iterator[Evidence]:
        """Evidence produced by the given tools (all tools when None), oldest first."""
        for entry in self.entries:
            if tools is None or entry.tool in tools:
                yield from entry.evidence


@lru_cache(maxsize=4096)
def evidence_urls(url: str | None, title: str, snippet: str) -> tuple[str, ...]:
    """The URLs an evidence item is found by, normalised and each once: the one the tool
    returned with it, and any written in its title or snippet.

    Cached like :func:`text_terms`: a busy session records the same knowledge-base hits again
    and again (and a trimmed session re-adds what it keeps), and the extraction and the URL
    parsing were a third of recording one (measured in ``benchmarks/bench_ledger.py``).
    """
    found = [url] if url else []
    found += extract_urls(canonical(f"{title} {snippet}").cased)
    return tuple(dict.fromkeys(normalize_url(u) for u in found))


_EMPTY = SessionLedger()


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
        # copies: what the caller holds may change, what the session recorded may not
        entry = LedgerEntry(session, member, tool, dict(arguments or {}), list(evidence or []))
        with self._lock:
            self._sessions.setdefault(session, SessionLedger()).add(entry)
            self._bound(session, entry)
        return entry

    def session(self, session: str) -> SessionLedger:
        self._upkeep(session)
        return self._sessions.get(session) or _EMPTY

    def open(self, session: str) -> SessionLedger:
        """The session's ledger, created when it has none yet (to keep state in it)."""
        with self._lock:
            if session not in self._used:
                self._touch(session, self._clock())  # so that it idles out like any other
            return self._sessions.setdefault(session, SessionLedger())

    def work_evidence(self, session: str, member: str) -> list[LedgerEntry]:
        """What ``member``'s tools recorded in ``session``: evidence of its work there only."""
        return self.session(session).entries_by(member)

    def entries_by(self, member: str, session: str | None = None) -> Iterator[LedgerEntry]:
        """Entries produced by ``member`` in ``session`` (every session when None)."""
        sessions = [self.session(session)] if session is not None else list(self._sessions.values())
        for ledger in sessions:
            yield from ledger.entries_by(member)

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
        """Forget the session's entries beyond ``max_entries`` (the oldest, one per record
        once full) and those older than ``max_age_s``, in place (:meth:`SessionLedger.forget`)."""
        stamps = self._stamps.get(session, [])
        held, cut = len(stamps), self._expired(stamps, now)
        limit = self.limits.max_entries
        start = max(cut, held - limit) if limit is not None else cut
        if start <= 0:
            return
        self.counts["entry.max_age"] += cut
        self.counts["entry.max_entries"] += start - cut
        self._sessions[session].forget(start)
        del stamps[:start]

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
