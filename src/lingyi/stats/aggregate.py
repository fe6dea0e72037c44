"""One streaming pass over the log: the counters behind every figure, and their merging.

:class:`Counters` are the figures of a set of verifications (per decision, member,
assertion type, tool and check code, intercepts, rejection reasons, a latency histogram per
member), counted by one method, :meth:`Counters.count`. :class:`LogPass` is what every pass
keeps besides: the hash chain, checked in the same pass by :class:`lingyi.log.ChainVerifier`
(the one ``lingyi log verify`` uses), the integrity findings, and the appeals whose
verification is looked up afterwards. The :class:`Aggregator` is the pass for one window:
lines outside it are verified on their raw bytes (:meth:`~lingyi.log.ChainVerifier.skim`)
without being parsed; the rollup's pass (:mod:`lingyi.stats.builder`) counts every record
into its local day instead. Memory depends on how many members, tools, codes (and, for the
rollup, days) exist, never on how many records the log holds. Passes over consecutive
chunks of the log merge into the one a single pass gives (:meth:`Aggregator.merge`).
"""

from __future__ import annotations

import collections
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lingyi.log.chain import (
    _TAIL_RE,
    GENESIS,
    ChainReport,
    ChainVerifier,
    Problem,
    tail_match,
)
from lingyi.log.keys import KeyRing
from lingyi.log.reader import LogLine, decode_line, raw_lines
from lingyi.log.records import SCHEMA_VERSION, normalise_ts, record_kind, subject_of, ts_key
from lingyi.redact import clip, redact_text
from lingyi.stats.histogram import LatencyHistogram
from lingyi.stats.judge import JudgeFigures
from lingyi.stats.window import Window

DECISIONS: tuple[str, ...] = ("approved", "rejected", "fallback")
_DEC_INDEX = {name: i for i, name in enumerate(DECISIONS)}
APPROVED, REJECTED, FALLBACK = 0, 1, 2
MAX_EXAMPLES = 20  # integrity examples kept; the counts stay exact beyond this
_NOT_REJECTING = ("warn", "fallback")  # failed checks that cannot have caused a rejection
_CURRENT_TEXT = str(SCHEMA_VERSION)
_CURRENT = _CURRENT_TEXT.encode()
_Z, _T = ord("Z"), ord("T")


def _count_in_python(counter: dict[str, int], items: Iterable[str]) -> None:
    for item in items:
        counter[item] = counter.get(item, 0) + 1


# What Counter.update runs for a list, without the Mapping check that costs more than the
# counting of a record's few codes (about 1.5 µs a call here); CPython has it in C.
_count: Callable[[dict[str, int], Iterable[str]], None] = getattr(
    collections, "_count_elements", _count_in_python
)


# --------------------------------------------------------------------------- intercepts


@dataclass(frozen=True)
class Intercept:
    """A named class of caught problem: non-approved verifications failing one of ``codes``.

    A code ending in ``.*`` matches every code under that prefix.
    """

    name: str
    codes: tuple[str, ...]

    def matches(self, code: str) -> bool:
        return any(_code_matches(pattern, code) for pattern in self.codes)


def _code_matches(pattern: str, code: str) -> bool:
    if pattern.endswith(".*"):
        return code.startswith(pattern[:-1])
    return code == pattern


# The mapping from check codes to the figures the council owners ask for, kept as data.
INTERCEPTS: tuple[Intercept, ...] = (
    Intercept("fabricated_communications", ("communication.on_record",)),
    Intercept("boundary_violations", ("boundary.*", "domain.scope")),
    Intercept("unlabelled_inferences", ("inference.labelled",)),
    Intercept("unsupported_conclusions", ("conclusion.*",)),
)


@dataclass
class Integrity:
    """What was wrong with the records themselves (the chain's findings are in
    :class:`~lingyi.log.ChainReport`), counted exactly, with the first few examples."""

    invalid: int = 0
    unknown_schema: int = 0
    schema_versions: Counter[str] = field(default_factory=Counter)
    other_kinds: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def note(self, lineno: int, record_id: object, problem: str) -> None:
        if len(self.examples) < MAX_EXAMPLES or lineno < self.examples[-1]["line"]:
            rid = record_id if isinstance(record_id, str) else None
            self.examples.append({"line": lineno, "id": rid, "problem": problem})
            self.examples = sorted(self.examples, key=lambda e: e["line"])[:MAX_EXAMPLES]

    def note_problem(self, problem: Problem) -> None:
        self.note(problem.lineno, problem.record_id, problem.text)

    def merge(self, other: Integrity, line_offset: int) -> None:
        self.invalid += other.invalid
        self.unknown_schema += other.unknown_schema
        self.schema_versions.update(other.schema_versions)
        self.other_kinds.update(other.other_kinds)
        moved = [{**e, "line": e["line"] + line_offset} for e in other.examples]
        self.examples = sorted(self.examples + moved, key=lambda e: e["line"])[:MAX_EXAMPLES]

    def as_json(self, chain: ChainReport) -> dict[str, Any]:
        """The ``integrity`` object: ``chain_ok`` is exactly ``lingyi log verify``'s verdict."""
        bad = chain.unreadable_count + self.invalid + chain.break_count + self.unknown_schema
        return {
            "ok": bad == 0,
            "chain_ok": chain.ok,
            "lines": chain.lines,
            "records": chain.records,
            "unreadable": chain.unreadable_count,
            "invalid": self.invalid,
            "chain_breaks": chain.break_count,
            "edited": chain.edited,
            "relinked": chain.relinked,
            "unhashed": chain.unhashed,
            "unknown_schema": self.unknown_schema,
            "schema_versions": dict(sorted(self.schema_versions.items())),
            "other_kinds": dict(sorted(self.other_kinds.items())),
            "examples": list(self.examples),
        }


Tally = list[int]  # [approved, rejected, fallback]


def _add(a: Tally, b: Tally) -> Tally:
    return [x + y for x, y in zip(a, b, strict=True)]


def _bump(table: dict[str, Tally], key: str, index: int) -> None:
    tally = table.get(key)
    if tally is None:
        tally = table[key] = [0, 0, 0]
    tally[index] += 1


@dataclass
class Appeals:
    """Appeal counters for one group (all, a member, a code)."""

    filed: int = 0
    upheld: int = 0
    overturned: int = 0
    overturned_approvals: int = 0
    # Of ``upheld``, those that kept an approval: left out of the false-positive rate, whose
    # denominator is the resolved appeals of *blocked* verdicts.
    upheld_approvals: int = 0

    def bump(self, kind: str, outcome: object, approved: bool) -> None:
        """Count one appeal (``kind`` appeal) or resolution of a verification."""
        if kind == "appeal":
            self.filed += 1
        elif outcome == "upheld":
            self.upheld += 1
            self.upheld_approvals += approved
        elif outcome == "overturned" and approved:
            self.overturned_approvals += 1  # a verdict that should have blocked
        elif outcome == "overturned":
            self.overturned += 1

    def add(self, other: Appeals) -> None:
        self.filed += other.filed
        self.upheld += other.upheld
        self.overturned += other.overturned
        self.overturned_approvals += other.overturned_approvals
        self.upheld_approvals += other.upheld_approvals

    def as_list(self) -> list[int]:
        return [
            self.filed,
            self.upheld,
            self.overturned,
            self.overturned_approvals,
            self.upheld_approvals,
        ]


def _finite_ms(value: object) -> float | None:
    """A latency in ms, or None: not a number (bool, text), NaN, infinite or absurdly big."""
    if value.__class__ not in (int, float):  # not bool
        return None
    try:
        ms = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return ms if -1e300 < ms < 1e300 else None  # also False for NaN


# --------------------------------------------------------------------------- counters


class Counters:
    """The figures of a set of verifications, as counters only.

    A windowed pass keeps one (:class:`Aggregator`); the rollup keeps one per member and
    local day (:mod:`lingyi.stats.rollup`), and a window's figures are the sum of its days',
    so both count a record with the same code, :meth:`count`.
    """

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Tally]] = {
            k: {} for k in ("member", "type", "tool", "code")
        }
        self.totals: Tally = [0, 0, 0]
        self.checked: Counter[str] = Counter()
        self.intercepted: Counter[str] = Counter({i.name: 0 for i in INTERCEPTS})
        self.reject_codes: Counter[str] = Counter()
        self.reject_examples: dict[str, str] = {}
        self.reject_lines: dict[str, int] = {}  # each example's line: the earliest one wins
        self.latency = LatencyHistogram()
        self.member_latency: dict[str, LatencyHistogram] = {}
        self._intercept_cache: dict[str, tuple[str, ...]] = {}
        self.judge = JudgeFigures()  # the judge's own figures (lingyi.stats.judge)
        self.shadow = ShadowFigures()  # what shadow checks would have decided
        # Calls let through that did not run, per tool then status (``outcome`` records):
        # failed executions, calls held for a person's approval, and those a person refused.
        self.outcomes: dict[str, Counter[str]] = {}

    def outcome(self, record: dict[str, Any]) -> None:
        """Count one ``outcome`` record under its tool and status."""
        tool, status = str(record.get("tool")), str(record.get("status"))
        self.outcomes.setdefault(tool, Counter())[status] += 1

    def count(
        self, record: dict[str, Any], member: str, index: int, lineno: int
    ) -> tuple[list[str], list[dict[str, Any]]] | None:
        """Count one verification of ``member`` whose decision is ``DECISIONS[index]``;
        returns the codes of its checks that ran and its failed checks (None: no checks
        list), for a caller that counts them again."""
        self.totals[index] += 1
        groups = self.groups  # _bump, inline: a tally is a non-empty list, never falsy
        table, key = groups["member"], member
        (table.get(key) or table.setdefault(key, [0, 0, 0]))[index] += 1
        table, key = groups["type"], str(record.get("type"))
        (table.get(key) or table.setdefault(key, [0, 0, 0]))[index] += 1
        tool = record.get("tool_call")
        if isinstance(tool, dict):
            table, key = groups["tool"], str(tool.get("name"))
            (table.get(key) or table.setdefault(key, [0, 0, 0]))[index] += 1
        checks = record.get("checks")
        seen, failed = None, []
        if isinstance(checks, list):
            seen = self._checked(checks)
            failed = seen[1]
            if failed or index == REJECTED:
                self._failures(record, failed, index, lineno)
        self._latency(member, record.get("latency_ms"))
        if "judge" in record:
            self.judge.feed(record)
        if "shadow" in record:
            self.shadow.feed(record.get("shadow"), index, failed)
        return seen

    def _checked(self, checks: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Count every check that ran; return their codes and the failed checks (the hot
        loop: kept lean)."""
        codes, failed = [], []
        for check in checks:
            if isinstance(check, dict):
                code = check.get("code")
                codes.append(code if isinstance(code, str) else str(code))
                if check.get("passed") is False:
                    failed.append(check)
        _count(self.checked, codes)  # counted in C
        return codes, failed

    def _failures(
        self, record: dict[str, Any], failed: list[dict[str, Any]], index: int, lineno: int
    ) -> None:
        hit: set[str] = set()
        blocking = False
        for check in failed:
            code = str(check.get("code"))
            _bump(self.groups["code"], code, index)
            if index != APPROVED:
                hit.update(self._intercepts_of(code))
            if index == REJECTED and check.get("on_fail") not in _NOT_REJECTING:
                blocking = True
                self._reject_reason(code, check.get("reason"), lineno)
        self.intercepted.update(hit)
        if index == REJECTED and not blocking:  # e.g. an older record without checks
            self._reject_reason("(no failed check)", record.get("reason"), lineno)

    def _reject_reason(self, code: str, reason: object, lineno: int) -> None:
        self.reject_codes[code] += 1
        if code not in self.reject_examples and isinstance(reason, str):
            # Redacted before it is cut: a key cut in half no longer looks like a key.
            self.reject_examples[code] = clip(redact_text(reason), 200)
            self.reject_lines[code] = lineno

    def _intercepts_of(self, code: str) -> tuple[str, ...]:
        names = self._intercept_cache.get(code)
        if names is None:
            names = tuple(i.name for i in INTERCEPTS if i.matches(code))
            self._intercept_cache[code] = names
        return names

    def _latency(self, member: str, value: object) -> None:
        ms = _finite_ms(value)
        if ms is None:
            return
        bucket = LatencyHistogram.bucket_of(ms)
        ns = round(ms * 1_000_000)
        self.latency.add(ms, bucket, ns)
        histogram = self.member_latency.get(member)
        if histogram is None:
            histogram = self.member_latency[member] = LatencyHistogram()
        histogram.add(ms, bucket, ns)

    def add(self, other: Counters, line_offset: int = 0) -> None:
        """Add ``other``'s counters; its lines are shifted by ``line_offset`` (a later chunk)."""
        for group, table in other.groups.items():
            mine = self.groups[group]
            for name, tally in table.items():
                into = mine.get(name)
                if into is None:
                    mine[name] = list(tally)
                else:
                    for index, value in enumerate(tally):
                        into[index] += value
        self.totals = _add(self.totals, other.totals)
        self.checked.update(other.checked)
        self.intercepted.update(other.intercepted)
        self.reject_codes.update(other.reject_codes)
        for code, text in other.reject_examples.items():
            line = other.reject_lines.get(code, 0) + line_offset
            if code not in self.reject_examples or line < self.reject_lines.get(code, 0):
                self.reject_examples[code], self.reject_lines[code] = text, line
        self.latency.merge(other.latency)
        for member, histogram in other.member_latency.items():
            self.member_latency.setdefault(member, LatencyHistogram()).merge(histogram)
        self.judge.merge(other.judge)
        self.shadow.merge(other.shadow)
        for tool, statuses in other.outcomes.items():
            self.outcomes.setdefault(tool, Counter()).update(statuses)


class ShadowFigures:
    """What the checks in shadow mode would have decided, as changes to the real figures.

    A verification with a ``shadow`` decision moves, in the "would have" figures, from its
    decision to the shadow one (in the totals and under each check that failed in it); every
    other verification would have been decided as it was. Kept as differences, so that the
    figures of any set of verifications are the sum of its parts' (chunks, rollup days).
    """

    def __init__(self) -> None:
        self.verifications = 0  # verifications a shadow check ran in
        self.moved: Tally = [0, 0, 0]  # would-have − actual, per decision
        self.code_moved: dict[str, Tally] = {}  # the same under each failed check
        self.codes: Counter[str] = Counter()  # shadow checks that would have blocked
        self.changed: Counter[str] = Counter()  # "approved→rejected": verifications

    def feed(self, shadow: object, index: int, failed: list[dict[str, Any]]) -> None:
        """Count one verification's shadow decision (``failed``: its failed checks)."""
        if not isinstance(shadow, dict):
            return
        would = _DEC_INDEX.get(str(shadow.get("decision")))
        if would is None:
            return  # not a decision: the verification counts as it was decided
        self.verifications += 1
        codes = shadow.get("codes")
        if isinstance(codes, list):
            self.codes.update(str(c) for c in codes)
        if would == index:
            return
        self.changed[f"{DECISIONS[index]}→{DECISIONS[would]}"] += 1
        self.moved[index] -= 1
        self.moved[would] += 1
        for code in (str(c.get("code")) for c in failed):  # as the real figures count them
            tally = self.code_moved.setdefault(code, [0, 0, 0])
            tally[index] -= 1
            tally[would] += 1

    def merge(self, other: ShadowFigures) -> None:
        self.verifications += other.verifications
        self.moved = _add(self.moved, other.moved)
        for code, tally in other.code_moved.items():
            self.code_moved[code] = _add(self.code_moved.get(code, [0, 0, 0]), tally)
        self.codes.update(other.codes)
        self.changed.update(other.changed)

    @property
    def empty(self) -> bool:
        return self.verifications == 0

    def as_state(self) -> dict[str, Any]:
        return {
            "verifications": self.verifications,
            "moved": self.moved,
            "code_moved": self.code_moved,
            "codes": dict(self.codes),
            "changed": dict(self.changed),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ShadowFigures:
        figures = cls()
        figures.verifications = state["verifications"]
        figures.moved = list(state["moved"])
        figures.code_moved = {k: list(v) for k, v in state["code_moved"].items()}
        figures.codes.update(state["codes"])
        figures.changed.update(state["changed"])
        return figures


# --------------------------------------------------------------------------- the pass


class LogPass:
    """What every pass over the log keeps whatever it counts: the chain (checked by
    :class:`lingyi.log.ChainVerifier`, the one ``lingyi log verify`` uses), what was wrong
    with the records, and the appeals whose verification must be looked up afterwards.

    Subclasses say where a verification and an appealed verification are counted
    (:meth:`_verification`, :meth:`count_appeal`).
    """

    def __init__(
        self,
        prev: str | None = GENESIS,
        keys: KeyRing | None = None,
        chain: ChainVerifier | None = None,
    ) -> None:
        self.integrity = Integrity()
        # With the log's keys: log verify's verdict. ``chain`` given: a verifier shared with
        # other passes over the same lines (:class:`WindowsPass`), which feeds and merges it.
        self.shared_chain = chain is not None
        self.chain = chain or ChainVerifier(prev, keys)
        self.pending_subjects: list[dict[str, Any]] = []

    def feed_raw(self, lineno: int, raw: bytes) -> None:
        """Count one line (parsed)."""
        self.feed(decode_line(lineno, raw))

    def feed(self, line: LogLine) -> None:
        """Count one parsed line (and check its place in the chain)."""
        if problem := self.chain.feed(line):
            self.integrity.note_problem(problem)
        self.count_line(line)

    def count_line(self, line: LogLine) -> None:
        """Count one parsed line whose place in the chain was checked already."""
        record = line.record
        if record is None:
            return
        self._schema(line.lineno, record)
        kind = record_kind(record)
        if kind == "verification":
            self._verification(line.lineno, record)
        elif kind in ("appeal", "appeal_resolution"):
            self._appeal_record(line.lineno, kind, record)
        elif kind == "approval":
            self._approval(line.lineno, record)
        elif kind == "outcome":
            self._outcome(line.lineno, record)
        else:
            self.integrity.other_kinds[kind] += 1

    def _schema(self, lineno: int, record: dict[str, Any]) -> None:
        version = record.get("v", 0)
        self.integrity.schema_versions[str(version)] += 1
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
            self.integrity.unknown_schema += 1
            self.integrity.note(lineno, record.get("id"), f"unknown schema version {version!r}")

    def valid_ts(self, lineno: int, record: dict[str, Any], ts: object) -> str | None:
        """``ts`` as the log's comparable key; None (counted invalid) when it is not a time."""
        key = normalise_ts(ts)
        if key is None:
            self.integrity.invalid += 1
            self.integrity.note(lineno, record.get("id"), f"bad ts {ts!r}")
        return key

    def _verification(self, lineno: int, record: dict[str, Any]) -> None:
        raise NotImplementedError

    def _approval(self, lineno: int, record: dict[str, Any]) -> None:
        """Count one approval event (lingyi.approvals) where its subclass keeps them."""
        raise NotImplementedError

    def _outcome(self, lineno: int, record: dict[str, Any]) -> None:
        """Count one call outcome (a failed or held call) where its subclass keeps them."""
        raise NotImplementedError

    def _appeal_record(self, lineno: int, kind: str, record: dict[str, Any]) -> None:
        subject = record.get("subject")
        if not isinstance(subject, dict):
            # Written without a snapshot of the verification: looked up after the pass.
            self.pending_subjects.append({"kind": kind, **_appeal_fields(record)})
            return
        self.count_appeal(lineno, kind, record.get("outcome"), subject, record)

    def count_appeal(
        self,
        lineno: int,
        kind: str,
        outcome: object,
        subject: dict[str, Any],
        record: dict[str, Any],
    ) -> None:
        raise NotImplementedError

    def merge_log(self, other: LogPass, line_offset: int) -> None:
        """Append the chain, integrity and pending appeals of the chunk that follows."""
        self.integrity.merge(other.integrity, line_offset)
        if not self.shared_chain:  # else the owner of the shared verifier merges it, once
            for problem in self.chain.merge(other.chain, line_offset):
                self.integrity.note_problem(problem)
        self.pending_subjects.extend(other.pending_subjects)

    # -- appeals written without a snapshot ----------------------------------------------

    def backfill_subjects(self, path: Path) -> None:
        """Appeals written without a snapshot: one more pass finds their verifications.

        Only those appeals are kept in memory (never verifications), so this stays bounded
        by the number of such appeals.
        """
        wanted = {str(p.get("appeal_of")) for p in self.pending_subjects}
        self.apply_subjects(find_subjects(path, wanted))

    def apply_subjects(self, subjects: dict[str, dict[str, Any] | None]) -> None:
        """Count the pending appeals with the verifications found for them."""
        for pending in self.pending_subjects:
            subject = subjects.get(str(pending.get("appeal_of")))
            if subject is None:
                self.integrity.invalid += 1
                self.integrity.note(0, pending.get("id"), "appeal of an unknown verification")
                continue
            self.count_appeal(0, pending["kind"], pending.get("outcome"), subject, pending)
        self.pending_subjects = []


def find_subjects(
    path: Path, wanted: set[str], start: int = 0, end: int | None = None
) -> dict[str, dict[str, Any] | None]:
    """The snapshot of the last verification with each id in ``wanted`` (None: not found).

    A line is parsed only if it could hold one of the ids: it contains the id's bytes, or
    a backslash (an id written with JSON escapes).
    """
    found: dict[str, dict[str, Any] | None] = dict.fromkeys(wanted)
    needles = [w.encode() for w in wanted]
    for lineno, _, raw in raw_lines(path, start, end):
        if b"\\" not in raw and not any(n in raw for n in needles):
            continue
        record = decode_line(lineno, raw).record
        if record and is_subject(record, found):
            found[str(record["id"])] = subject_of(record).model_dump()
    return found


def is_subject(record: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Is ``record`` a verification whose id is one of ``wanted``'s keys?"""
    rid = record.get("id")
    return isinstance(rid, str) and rid in wanted and record_kind(record) == "verification"


class Aggregator(LogPass, Counters):
    """One streaming pass over the log for one window; ``StatsView`` gives the stable JSON."""

    def __init__(
        self,
        window: Window,
        member: str | None = None,
        prev: str | None = GENESIS,
        keys: KeyRing | None = None,
        chain: ChainVerifier | None = None,
    ) -> None:
        LogPass.__init__(self, prev, keys, chain)
        Counters.__init__(self)
        self.window, self.member = window, member
        self.start_key, self.end_key = ts_key(window.start), ts_key(window.end)
        self._start_bytes, self._end_bytes = self.start_key.encode(), self.end_key.encode()
        self.day_keys = window.day_keys()
        self.day_tallies: list[Tally] = [[0, 0, 0] for _ in self.day_keys]
        self.appeals: dict[tuple[str, str], Appeals] = {}
        # Per member, the checks that ran and the decisions where each failed (the drill-down
        # and the week-over-week changes per member and check); bounded by members × codes.
        self.member_codes: dict[str, dict[str, Tally]] = {}
        self.member_checked: dict[str, Counter[str]] = {}
        self.approvals: Counter[str] = Counter()  # approval events, by event

    # -- per line ----------------------------------------------------------------------

    def feed_raw(self, lineno: int, raw: bytes) -> None:
        """Count one line; verifications outside the window are only verified, not parsed."""
        if not self.skimmed(raw, tail_match(raw)):
            self.feed(decode_line(lineno, raw))

    def skimmed(self, raw: bytes, tail: re.Match[bytes] | None) -> bool:
        """Was the line (``tail``: its :func:`tail_match`) a verification outside the window,
        verified and counted without being parsed? False: nothing counted, :meth:`feed` it."""
        if (
            tail is not None
            and (tail[2] == _CURRENT or int(tail[2]) <= SCHEMA_VERSION)
            and self._outside(tail[1])
            and self.chain.skim(raw, tail)
        ):
            self.integrity.schema_versions[tail[2].decode()] += 1
            return True
        return False

    def _outside(self, ts: bytes) -> bool:
        if len(ts) == 24 and ts[23] == _Z and ts[10] == _T:  # the writer's own format
            return not self._start_bytes <= ts < self._end_bytes  # as the keys compare
        key = normalise_ts(ts.decode())
        return key is not None and not self.start_key <= key < self.end_key

    def _in_window(self, lineno: int, record: dict[str, Any], ts: object) -> str | None:
        key = self.valid_ts(lineno, record, ts)
        return key if key is not None and self.start_key <= key < self.end_key else None

    def _verification(self, lineno: int, record: dict[str, Any]) -> None:
        ts = record.get("ts")
        if ts.__class__ is str and len(ts) == 24 and ts[23] == "Z" and ts[10] == "T":
            key = ts if self.start_key <= ts < self.end_key else None  # normalise_ts's shortcut
        else:
            key = self._in_window(lineno, record, ts)
        if key is None:
            return
        member = record.get("member")
        if self.member is not None and member != self.member:
            return
        index = _DEC_INDEX.get(record.get("decision"))  # type: ignore[arg-type]
        if index is None:
            self.integrity.invalid += 1
            self.integrity.note(lineno, record.get("id"), "no valid decision")
            return
        seen = self.count(record, str(member), index, lineno)
        if seen is not None:
            self._by_member_code(str(member), index, *seen)
        self.day_tallies[bisect_right(self.day_keys, key) - 1][index] += 1

    def _approval(self, lineno: int, record: dict[str, Any]) -> None:
        """An approval event in the window (by its own ts), of the member asked for."""
        if self._in_window(lineno, record, record.get("ts")) is None:
            return
        if self.member is None or record.get("member") == self.member:
            self.approvals[str(record.get("event"))] += 1

    def _outcome(self, lineno: int, record: dict[str, Any]) -> None:
        """A call outcome in the window (by its own ts), of the member asked for."""
        if self._in_window(lineno, record, record.get("ts")) is None:
            return
        if self.member is None or record.get("member") == self.member:
            self.outcome(record)

    def _by_member_code(
        self, member: str, index: int, ran: list[str], failed: list[dict[str, Any]]
    ) -> None:
        """Count one verification's checks under its member: the codes that ran and the
        failed checks, as :meth:`_checked` found them."""
        checked = self.member_checked.get(member)  # not setdefault: no Counter() per record
        if checked is None:
            checked = self.member_checked[member] = Counter()
        _count(checked, ran)
        codes = self.member_codes.get(member)
        if codes is None:
            codes = self.member_codes[member] = {}
        for check in failed:
            _bump(codes, str(check.get("code")), index)

    def add_member_codes(self, member: str, codes: dict[str, Tally], checked: Counter[str]) -> None:
        """Add one member's per-check counters (a later chunk, or a day of the rollup)."""
        mine = self.member_codes.setdefault(member, {})
        for code, tally in codes.items():
            mine[code] = _add(mine.get(code, [0, 0, 0]), tally)
        self.member_checked.setdefault(member, Counter()).update(checked)

    # -- appeals -----------------------------------------------------------------------

    def count_appeal(
        self,
        lineno: int,
        kind: str,
        outcome: object,
        subject: dict[str, Any],
        record: dict[str, Any],
    ) -> None:
        """Attribute an appeal to the verification it concerns (window by its ts)."""
        if self._in_window(lineno, record, subject.get("ts")) is None:
            return
        member = str(subject.get("member"))
        if self.member is not None and member != self.member:
            return
        approved = subject.get("decision") == "approved"
        for group in appeal_groups(member, subject.get("codes")):
            self.appeals.setdefault(group, Appeals()).bump(kind, outcome, approved)

    # -- merging chunks ----------------------------------------------------------------

    def merge(self, other: Aggregator, line_offset: int) -> None:
        """Add the counters of the chunk that follows this one in the log."""
        self.merge_log(other, line_offset)
        self.add(other, line_offset)
        self.day_tallies = [
            _add(a, b) for a, b in zip(self.day_tallies, other.day_tallies, strict=True)
        ]
        for key, counts in other.appeals.items():
            self.appeals.setdefault(key, Appeals()).add(counts)
        self.approvals.update(other.approvals)
        for name, codes in other.member_codes.items():
            self.add_member_codes(name, codes, other.member_checked.get(name, Counter()))


class WindowsPass:
    """One pass over the log for several windows (a period and the one before): each line is
    read, its tail matched, its hash and link checked once by the pass's one
    :class:`~lingyi.log.ChainVerifier` (shared by every window's :class:`Aggregator`) and, if
    a window needs it, parsed once; the aggregators count exactly as in passes of their own.

    A verification outside every window, as the writer wrote it, is verified on its raw bytes
    (:meth:`~lingyi.log.ChainVerifier.skim`) and only its schema version counted; one inside
    a window is counted by that window's aggregator, the others only count its version.
    """

    def __init__(
        self,
        windows: Sequence[Window],
        member: str | None = None,
        prev: str | None = GENESIS,
        keys: KeyRing | None = None,
    ) -> None:
        self.chain = ChainVerifier(prev, keys)
        self.aggregators = [Aggregator(w, member, chain=self.chain) for w in windows]
        self.bounds = [(a._start_bytes, a._end_bytes) for a in self.aggregators]
        self.skimmed = 0  # verifications outside every window, skimmed, not yet settled
        # Per window, its verifications counted by it alone, whose version the other windows
        # have not counted yet (settle() does).
        self.owned = [0] * len(self.aggregators)
        self.first = min((b[0] for b in self.bounds), default=b"")
        self.last = max((b[1] for b in self.bounds), default=b"")
        # A verification inside one window is counted by that window's aggregator alone
        # only when no other window could hold it too (the period and the one before).
        self.disjoint = all(
            e1 <= s2 or e2 <= s1
            for i, (s1, e1) in enumerate(self.bounds)
            for s2, e2 in self.bounds[i + 1 :]
        )

    def feed_raw(self, lineno: int, raw: bytes) -> None:
        self.feed_tail(lineno, raw, _TAIL_RE.search(raw, len(raw) - 240))

    def feed_tail(self, lineno: int, raw: bytes, tail: re.Match[bytes] | None) -> None:
        """:meth:`feed_raw` for a line whose :func:`tail_match` is ``tail``, found already."""
        where = None if tail is None or tail[2] != _CURRENT else self._window_of(tail[1])
        if where == -1 and self.chain.skim(raw, tail):  # type: ignore[arg-type]
            self.skimmed += 1  # counted into the aggregators' schema versions by settle()
            return
        line = decode_line(lineno, raw)
        problem = self.chain.feed_written(line, tail)
        own = (  # the one window that counts this verification; None: each aggregator decides
            where
            if where is not None
            and where >= 0
            and self.disjoint
            and record_kind(line.record or {}) == "verification"
            else None
        )
        if own is not None and problem is None:  # the usual case: settle() counts the others'
            self.owned[own] += 1
            self.aggregators[own].count_line(line)
            return
        for index, agg in enumerate(self.aggregators):
            if problem:
                agg.integrity.note_problem(problem)
            # A verification of another window (with a problem noted): its version only.
            if own is not None and index != own:
                agg.integrity.schema_versions[_CURRENT_TEXT] += 1
            else:
                agg.count_line(line)

    def settle(self) -> None:
        """Count the lines skimmed so far, and those another window counted, into every
        aggregator's schema versions (once per line, not once per line and window, while
        the pass runs)."""
        owned = sum(self.owned)
        for index, agg in enumerate(self.aggregators):
            if count := self.skimmed + owned - self.owned[index]:
                agg.integrity.schema_versions[_CURRENT_TEXT] += count
        self.skimmed = 0
        self.owned = [0] * len(self.aggregators)

    def _window_of(self, ts: bytes) -> int | None:
        """The index of the window a writer's timestamp falls in (-1: none); None: not the
        writer's format (the record is parsed and each aggregator decides)."""
        if len(ts) != 24 or ts[23] != _Z or ts[10] != _T or not ts.isascii():
            return None
        if not self.first <= ts < self.last:
            return -1  # before or after every window: most lines of a big log
        for index, (start, end) in enumerate(self.bounds):
            if start <= ts < end:
                return index
        return -1

    def merge(self, other: WindowsPass, line_offset: int) -> None:
        """Add the passes of the chunk that follows this one in the log."""
        self.settle()
        other.settle()
        found = self.chain.merge(other.chain, line_offset)
        for mine, theirs in zip(self.aggregators, other.aggregators, strict=True):
            mine.merge(theirs, line_offset)
            for problem in found:
                mine.integrity.note_problem(problem)

    def backfill_subjects(self, path: Path) -> None:
        """Appeals written without a snapshot, of every window: one more pass for them all."""
        pending = [p for agg in self.aggregators for p in agg.pending_subjects]
        if pending:
            found = find_subjects(path, {str(p.get("appeal_of")) for p in pending})
            for agg in self.aggregators:
                agg.apply_subjects(found)


def appeal_groups(member: str, codes: object) -> list[tuple[str, str]]:
    """The groups an appeal counts in: all, its verification's member, each failed code."""
    listed = codes if isinstance(codes, list) else []
    return [("all", ""), ("member", member), *(("code", str(c)) for c in listed)]


def _appeal_fields(record: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "ts", "appeal_of", "appeal_id", "outcome")
    return {k: record.get(k) for k in keep}
