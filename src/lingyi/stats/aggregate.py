"""The counters behind every figure of one window, fed the rows of the index.

:class:`Counters` are the figures of a set of verifications (per decision, member,
assertion type, tool and check code, intercepts, rejection reasons, a latency histogram per
member). The :class:`Aggregator` counts one window: its verifications, approvals, outcomes
and appeals, as the index (:mod:`lingyi.store`) gives them (authenticated records only, in
log order). The verifications' counts are SQL over the index (:meth:`Aggregator.from_index`,
what the stats run); :meth:`Counters.count` counts one record in Python, the definition the
SQL counts are held to (``tests/test_stats_sql.py``). Memory depends on how many members,
tools and codes exist, never on how many records the window holds.
:func:`integrity_json` is what the index found wrong with the log as a whole.
"""

from __future__ import annotations

import collections
import itertools
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lingyi.log.reader import loads
from lingyi.log.records import normalise_ts, ts_key
from lingyi.redact import clip, redact_text
from lingyi.stats.histogram import LatencyHistogram
from lingyi.stats.judge import JudgeFigures
from lingyi.stats.window import Window
from lingyi.store import Store, Summary, WindowCounts
from lingyi.store.counts import NOT_REJECTING
from lingyi.store.latency import finite_ms

DECISIONS: tuple[str, ...] = ("approved", "rejected", "fallback")
_DEC_INDEX = {name: i for i, name in enumerate(DECISIONS)}
APPROVED, REJECTED, FALLBACK = 0, 1, 2


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


def integrity_json(summary: Summary) -> dict[str, Any]:
    """The ``integrity`` object: ``chain_ok`` is exactly ``lingyi log verify``'s verdict."""
    chain = summary.chain
    bad = chain.unreadable_count + summary.invalid + chain.break_count + summary.unknown_schema
    anchor = summary.checkpoints
    return {
        "ok": bad == 0 and summary.verified,
        "chain_ok": chain.ok,
        "checkpoints_ok": None if anchor is None else anchor.ok,
        "verified": summary.verified,
        "lines": chain.lines,
        "records": chain.records,
        "unreadable": chain.unreadable_count,
        "invalid": summary.invalid,
        "chain_breaks": chain.break_count,
        "edited": chain.edited,
        "relinked": chain.relinked,
        "stripped": chain.stripped,
        "unhashed": chain.unhashed,
        "unknown_schema": summary.unknown_schema,
        "schema_versions": dict(sorted(summary.schema_versions.items())),
        "other_kinds": dict(sorted(summary.other_kinds.items())),
        "examples": sorted(summary.examples, key=lambda e: e["line"]),
    }


Tally = list[int]  # [approved, rejected, fallback]


def _add(a: Tally, b: Tally) -> Tally:
    return [x + y for x, y in zip(a, b, strict=True)]


def _bump(table: dict[str, Tally], key: str, index: int, n: int = 1) -> None:
    tally = table.get(key)
    if tally is None:
        tally = table[key] = [0, 0, 0]
    tally[index] += n


_UNEXPLAINED = "(no failed check)"  # a rejection no failed blocking check explains


def _reason_of(record: dict[str, Any], code: str) -> str | None:
    """The reason a rejection gives for ``code``: its first blocking failed check of that
    code, or the record's own reason for :data:`_UNEXPLAINED`; None if it is not text."""
    if code == _UNEXPLAINED:
        reason = record.get("reason")
        return reason if isinstance(reason, str) else None
    for check in record.get("checks") or []:
        if (isinstance(check, dict) and check.get("passed") is False
                and str(check.get("code")) == code and check.get("on_fail") not in NOT_REJECTING
                and isinstance(check.get("reason"), str)):  # fmt: skip
            return str(check["reason"])
    return None


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


# --------------------------------------------------------------------------- counters


class Counters:
    """The figures of a set of verifications, as counters only, each counted by
    :meth:`count`."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Tally]] = {
            k: {} for k in ("member", "type", "tool", "code")
        }
        self.totals: Tally = [0, 0, 0]
        self.checked: Counter[str] = Counter()
        self.intercepted: Counter[str] = Counter({i.name: 0 for i in INTERCEPTS})
        self.reject_codes: Counter[str] = Counter()
        self.reject_examples: dict[str, str] = {}
        self.latency = LatencyHistogram()
        self.member_latency: dict[str, LatencyHistogram] = {}
        self._intercept_cache: dict[str, tuple[str, ...]] = {}
        self.judge = JudgeFigures()  # the judge's own figures (lingyi.stats.judge)
        self.shadow = ShadowFigures()  # what shadow checks would have decided
        # Verifications that a check could not settle (its on_uncertain decided), by decision
        # and by the code of the check: how much traffic no rule settled.
        self.uncertain: Tally = [0, 0, 0]
        self.uncertain_codes: Counter[str] = Counter()
        # Calls let through that did not run, per tool then status (``outcome`` records):
        # failed executions, calls held for a person's approval, and those a person refused.
        self.outcomes: dict[str, Counter[str]] = {}

    def outcome(self, record: dict[str, Any]) -> None:
        """Count one ``outcome`` record under its tool and status."""
        tool, status = str(record.get("tool")), str(record.get("status"))
        self.outcomes.setdefault(tool, Counter())[status] += 1

    def count(
        self, record: dict[str, Any], member: str, index: int
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
                self._failures(record, failed, index)
        self._latency(member, record.get("latency_ms"))
        self.flagged(record, index, failed)
        return seen

    def flagged(self, record: dict[str, Any], index: int, failed: list[dict[str, Any]]) -> None:
        """The figures read from a record's body: its judge trace, its shadow decision, its
        uncertain checks (``failed``: its failed checks)."""
        if "judge" in record:
            self.judge.feed(record)
        if "shadow" in record:
            self.shadow.feed(record.get("shadow"), index, failed)
        if unsure := record.get("uncertain"):
            self.uncertain[index] += 1
            self.uncertain_codes.update(str(code) for code in unsure)

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

    def _failures(self, record: dict[str, Any], failed: list[dict[str, Any]], index: int) -> None:
        hit: set[str] = set()
        blocking = False
        for check in failed:
            code = str(check.get("code"))
            _bump(self.groups["code"], code, index)
            if index != APPROVED:
                hit.update(self._intercepts_of(code))
            if index == REJECTED and check.get("on_fail") not in NOT_REJECTING:
                blocking = True
                self._reject_reason(code, check.get("reason"))
        self.intercepted.update(hit)
        if index == REJECTED and not blocking:  # e.g. an older record without checks
            self._reject_reason(_UNEXPLAINED, record.get("reason"))

    def _reject_reason(self, code: str, reason: object) -> None:
        self.reject_codes[code] += 1
        if code not in self.reject_examples and isinstance(reason, str):
            # Redacted before it is cut: a key cut in half no longer looks like a key.
            self.reject_examples[code] = clip(redact_text(reason), 200)

    def _intercepts_of(self, code: str) -> tuple[str, ...]:
        names = self._intercept_cache.get(code)
        if names is None:
            names = tuple(i.name for i in INTERCEPTS if i.matches(code))
            self._intercept_cache[code] = names
        return names

    def _latency(self, member: str, value: object) -> None:
        ms = finite_ms(value)
        if ms is None:
            return
        bucket = LatencyHistogram.bucket_of(ms)
        ns = round(ms * 1_000_000)
        self.latency.add(ms, bucket, ns)
        histogram = self.member_latency.get(member)
        if histogram is None:
            histogram = self.member_latency[member] = LatencyHistogram()
        histogram.add(ms, bucket, ns)


class ShadowFigures:
    """What the checks in shadow mode would have decided, as changes to the real figures.

    A verification with a ``shadow`` decision moves, in the "would have" figures, from its
    decision to the shadow one (in the totals and under each check that failed in it); every
    other verification would have been decided as it was. Kept as differences from the
    real figures, which the "would have" figures are built on.
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


class Aggregator(Counters):
    """The counters of one window; ``StatsView`` gives the stable JSON."""

    def __init__(self, window: Window, member: str | None = None) -> None:
        Counters.__init__(self)
        self.window, self.member = window, member
        self.start_key, self.end_key = ts_key(window.start), ts_key(window.end)
        self.day_keys = window.day_keys()
        self.day_tallies: list[Tally] = [[0, 0, 0] for _ in self.day_keys]
        self.appeals: dict[tuple[str, str], Appeals] = {}
        # Per member, the checks that ran and the decisions where each failed (the drill-down
        # and the week-over-week changes per member and check); bounded by members × codes.
        self.member_codes: dict[str, dict[str, Tally]] = {}
        self.member_checked: dict[str, Counter[str]] = {}
        self.approvals: Counter[str] = Counter()  # approval events, by event

    def _in_window(self, ts: object) -> str | None:
        key = normalise_ts(ts)
        return key if key is not None and self.start_key <= key < self.end_key else None

    def _of_member(self, record: dict[str, Any]) -> bool:
        return self.member is None or record.get("member") == self.member

    def verification(self, record: dict[str, Any]) -> None:
        """Count one verification record in Python (what :meth:`from_index` must equal)."""
        key = self._in_window(record.get("ts"))
        index = _DEC_INDEX.get(str(record.get("decision")))
        if key is None or index is None or not self._of_member(record):
            return
        member = str(record.get("member"))
        seen = self.count(record, member, index)
        if seen is not None:
            self._by_member_code(member, index, *seen)
        self.day_tallies[bisect_right(self.day_keys, key) - 1][index] += 1

    def from_index(self, store: Store) -> None:
        """Count the window's verifications from the index: the counts by SQL
        (:meth:`Store.counts`), the body read only for what needs it (flagged records, the
        example of each rejection reason). The same figures as :meth:`verification` fed
        every verification of the window (``tests/test_stats_sql.py``)."""
        counts = store.counts(self.start_key, self.end_key, self.member, self.day_keys)
        self._decisions(counts)
        first = self._checks(counts)
        for member, bucket, n, ns, low, high in counts.latencies:
            self.latency.add_bucket(bucket, n, ns, low, high)
            histogram = self.member_latency.setdefault(member, LatencyHistogram())
            histogram.add_bucket(bucket, n, ns, low, high)
        for _, record in store.verifications(self.start_key, self.end_key, self.member,
                                             flagged=True):  # fmt: skip
            self._flagged_row(record)
        self._examples(store, first)

    def _decisions(self, counts: WindowCounts) -> None:
        groups = self.groups
        for member, kind, tool, decision, day, n in counts.decisions:
            index = _DEC_INDEX[decision]
            self.totals[index] += n
            self.day_tallies[day][index] += n
            _bump(groups["member"], member, index, n)
            _bump(groups["type"], kind, index, n)
            if tool is not None:
                _bump(groups["tool"], tool, index, n)

    def _checks(self, counts: WindowCounts) -> dict[str, int]:
        """Count the checks that ran and those that failed; the first line of each
        rejection reason (where its example is looked for)."""
        for member, ran, n in counts.ran:
            checked = self.member_checked.setdefault(member, Counter())
            for code in loads(ran):
                self.checked[code] += n
                checked[code] += n
        first: dict[str, int] = {}
        for member, code, decision, failed, blocking, line in counts.failed:
            index = _DEC_INDEX[decision]
            _bump(self.groups["code"], code, index, failed)
            _bump(self.member_codes.setdefault(member, {}), code, index, failed)
            if blocking and index == REJECTED and line is not None:
                self.reject_codes[code] += blocking
                first[code] = min(first.get(code, line), line)
        unexplained, line = counts.unexplained
        if unexplained and line is not None:
            self.reject_codes[_UNEXPLAINED] += unexplained
            first[_UNEXPLAINED] = line
        hits: dict[int, set[str]] = {}
        for line, code in counts.blocked:  # an intercept counts a verification once
            hits.setdefault(line, set()).update(self._intercepts_of(code))
        _count(self.intercepted, itertools.chain.from_iterable(hits.values()))  # in C
        return first

    def _flagged_row(self, record: dict[str, Any]) -> None:
        checks = record.get("checks")
        failed = [c for c in checks if isinstance(c, dict) and c.get("passed") is False] if (
            isinstance(checks, list)) else []  # fmt: skip
        self.flagged(record, _DEC_INDEX[str(record.get("decision"))], failed)

    def _examples(self, store: Store, first: dict[str, int]) -> None:
        """The example of each rejection reason: the first one in log order that has one."""
        for code, line in first.items():
            which = None if code == _UNEXPLAINED else code
            for _, record in store.rejections(self.start_key, self.end_key, self.member,
                                              which, line):  # fmt: skip
                reason = _reason_of(record, code)
                if reason is not None:
                    self.reject_examples[code] = clip(redact_text(reason), 200)
                    break

    def approval(self, record: dict[str, Any]) -> None:
        """An approval event in the window (by its own ts), of the member asked for."""
        if self._in_window(record.get("ts")) is not None and self._of_member(record):
            self.approvals[str(record.get("event"))] += 1

    def call_outcome(self, record: dict[str, Any]) -> None:
        """A call outcome in the window (by its own ts), of the member asked for."""
        if self._in_window(record.get("ts")) is not None and self._of_member(record):
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

    def appeal(self, kind: str, outcome: object, subject: dict[str, Any]) -> None:
        """Attribute an appeal (or its resolution) to the verification it concerns, whose
        snapshot is ``subject`` (window by the verification's ts)."""
        if self._in_window(subject.get("ts")) is None:
            return
        member = str(subject.get("member"))
        if self.member is not None and member != self.member:
            return
        approved = subject.get("decision") == "approved"
        for group in appeal_groups(member, subject.get("codes")):
            self.appeals.setdefault(group, Appeals()).bump(kind, outcome, approved)


def appeal_groups(member: str, codes: object) -> list[tuple[str, str]]:
    """The groups an appeal counts in: all, its verification's member, each failed code."""
    listed = codes if isinstance(codes, list) else []
    return [("all", ""), ("member", member), *(("code", str(c)) for c in listed)]
