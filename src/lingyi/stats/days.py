"""The rollup's unit: the counters of one local day, per member, in one time zone.

A :class:`Day` holds one :class:`Cell` per member (the :class:`~lingyi.stats.aggregate.Counters`
of that member's verifications on that day, plus those whose decision was not valid) and the
appeals of that day's verifications, per member. A window of whole local days in the zone is
the sum of its days, and ``--member`` the sum of that member's cells, so the figures of any
such window come from the rollup without reading the log.

A record's day is found the way a window finds its records: by comparing the log's timestamp
key with the keys of local midnights as plain strings (:class:`ZoneDays`), so a record is in
a day of the rollup exactly when a window of that day would count it, whatever its ``ts``
looks like.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta, tzinfo
from typing import Any

from lingyi.log.records import ts_key
from lingyi.stats.aggregate import Appeals, Counters, ShadowFigures
from lingyi.stats.histogram import LatencyHistogram
from lingyi.stats.judge import JudgeFigures
from lingyi.stats.window import local_midnight

MAX_EXAMPLES = 20  # as many "no valid decision" examples as stats ever show

# A cell's member: its name as stats show it, and whether the record's member was a string
# (only a string can match ``--member``; ``None`` and ``"None"`` show alike but filter apart).
MemberKey = tuple[str, bool]


def member_key(member: object) -> MemberKey:
    return (member, True) if isinstance(member, str) else (str(member), False)


class Cell(Counters):
    """One member's verifications on one day, and those of them without a valid decision."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid = 0
        self.invalid_examples: list[tuple[int, str | None]] = []  # (line, id), first ones

    def invalid_decision(self, lineno: int, record_id: object) -> None:
        self.invalid += 1
        if len(self.invalid_examples) < MAX_EXAMPLES:
            rid = record_id if isinstance(record_id, str) else None
            self.invalid_examples.append((lineno, rid))

    def add_cell(self, other: Cell, line_offset: int) -> None:
        self.add(other, line_offset)
        self.invalid += other.invalid
        moved = [(line + line_offset, rid) for line, rid in other.invalid_examples]
        self.invalid_examples = sorted(self.invalid_examples + moved)[:MAX_EXAMPLES]

    def as_state(self) -> dict[str, Any]:
        histogram = next(iter(self.member_latency.values()), None)
        return {
            "totals": self.totals,
            "type": self.groups["type"],
            "tool": self.groups["tool"],
            "code": self.groups["code"],
            "checked": dict(self.checked),
            "intercepted": {k: v for k, v in self.intercepted.items() if v},
            "rejects": dict(self.reject_codes),
            "examples": {c: [self.reject_lines[c], t] for c, t in self.reject_examples.items()},
            "latency": histogram.as_state() if histogram is not None else None,
            "invalid": self.invalid,
            "invalid_examples": [list(e) for e in self.invalid_examples],
            "judge": self.judge.as_state() if self.judge.consulted else None,
            "shadow": None if self.shadow.empty else self.shadow.as_state(),
            "outcomes": {tool: dict(s) for tool, s in self.outcomes.items()},
        }

    @classmethod
    def from_state(cls, name: str, state: dict[str, Any]) -> Cell:
        cell = cls()
        cell.totals = list(state["totals"])
        if sum(cell.totals):
            cell.groups["member"] = {name: list(cell.totals)}
        for group in ("type", "tool", "code"):
            cell.groups[group] = {k: list(v) for k, v in state[group].items()}
        cell.checked.update(state["checked"])
        cell.intercepted.update(state["intercepted"])
        cell.reject_codes.update(state["rejects"])
        for code, (line, text) in state["examples"].items():
            cell.reject_examples[code], cell.reject_lines[code] = text, line
        if state["latency"] is not None:  # a cell's member is all of it: two equal copies
            cell.latency = LatencyHistogram.from_state(state["latency"])
            cell.member_latency[name] = LatencyHistogram.from_state(state["latency"])
        cell.invalid = state["invalid"]
        cell.invalid_examples = [(line, rid) for line, rid in state["invalid_examples"]]
        if state["judge"] is not None:
            cell.judge = JudgeFigures.from_state(state["judge"])
        if state["shadow"] is not None:
            cell.shadow = ShadowFigures.from_state(state["shadow"])
        cell.outcomes = {tool: Counter(s) for tool, s in state["outcomes"].items()}
        return cell


class Day:
    """One local day ``[start, end)`` (timestamp keys) of one zone: cells and appeals."""

    def __init__(self, start: str, end: str) -> None:
        self.start, self.end = start, end
        self.cells: dict[MemberKey, Cell] = {}
        # Appeals by the appealed verification's member (as text): all of them, and per code.
        self.appeals: dict[str, tuple[Appeals, dict[str, Appeals]]] = {}
        # Approval events (lingyi.approvals) by the member of the call, then by event.
        self.approvals: dict[MemberKey, Counter[str]] = {}

    def approval(self, member: MemberKey, event: str) -> None:
        self.approvals.setdefault(member, Counter())[event] += 1

    def cell(self, key: MemberKey) -> Cell:
        found = self.cells.get(key)
        if found is None:
            found = self.cells[key] = Cell()
        return found

    def appeal(
        self, member: str, kind: str, outcome: object, approved: bool, codes: object
    ) -> None:
        every, by_code = self.appeals.setdefault(member, (Appeals(), {}))
        every.bump(kind, outcome, approved)
        for code in codes if isinstance(codes, list) else []:
            by_code.setdefault(str(code), Appeals()).bump(kind, outcome, approved)

    def add_day(self, other: Day, line_offset: int) -> None:
        for key, cell in other.cells.items():
            self.cell(key).add_cell(cell, line_offset)
        for member, (every, by_code) in other.appeals.items():
            mine, mine_by_code = self.appeals.setdefault(member, (Appeals(), {}))
            mine.add(every)
            for code, counts in by_code.items():
                mine_by_code.setdefault(code, Appeals()).add(counts)
        for key, events in other.approvals.items():
            self.approvals.setdefault(key, Counter()).update(events)

    def as_state(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "cells": [[name, is_text, c.as_state()] for (name, is_text), c in self.cells.items()],
            "appeals": {
                m: [every.as_list(), {c: a.as_list() for c, a in by_code.items()}]
                for m, (every, by_code) in self.appeals.items()
            },
            "approvals": [
                [name, is_text, dict(e)] for (name, is_text), e in self.approvals.items()
            ],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Day:
        day = cls(state["start"], state["end"])
        for name, is_text, cell in state["cells"]:
            day.cells[(name, is_text)] = Cell.from_state(name, cell)
        for member, (every, by_code) in state["appeals"].items():
            day.appeals[member] = (
                Appeals(*every),
                {c: Appeals(*counts) for c, counts in by_code.items()},
            )
        for name, is_text, events in state["approvals"]:
            day.approvals[(name, is_text)] = Counter(events)
        return day


_MAX_ORDINAL = date.max.toordinal()


class ZoneDays:
    """The days of one zone: which day a timestamp key falls in, and the days counted.

    Days are found by string comparison with the keys of local midnights, as a window
    compares: the key's own date is tried first (with the days around it, since a zone is
    at most a day off UTC), then a binary search over all dates for keys that are not
    dates. Keys before the first representable midnight or after the last fall in no day:
    no window can contain them.
    """

    def __init__(self, name: str, zone: tzinfo) -> None:
        self.name, self.zone = name, zone
        self.days: dict[str, Day] = {}
        self.raw: dict[str, bytes] = {}  # days read from the rollup file, decoded when needed
        self._near: dict[str, tuple[tuple[str, str], ...]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "zone": self.zone, "days": self.days, "raw": self.raw}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._near = {}

    def boundary(self, day: date) -> str | None:
        """The key of ``day``'s local midnight; None when it is not a representable time."""
        try:
            return ts_key(local_midnight(day, self.zone))
        except (OverflowError, ValueError):
            return None

    def day(self, name: str) -> Day | None:
        """The counted day ``name`` (an ISO date), decoded from the file if need be."""
        found = self.days.get(name)
        if found is None and name in self.raw:
            from lingyi.stats.store import decode_day  # the file format lives with the file

            found = self.days[name] = decode_day(self.raw.pop(name))
        return found

    def day_for(self, key: str) -> Day | None:
        """The day a record with timestamp key ``key`` counts in (created if new)."""
        name = self.day_name(key)
        if name is None:
            return None
        found = self.day(name)
        if found is None:
            start = date.fromisoformat(name)
            end = self.boundary(start + timedelta(days=1)) if start < date.max else None
            found = self.days[name] = Day(self.boundary(start) or "", end or "\U0010ffff")
        return found

    def day_name(self, key: str) -> str | None:
        near = self._near.get(key[:10])
        if near is None:
            near = self._near[key[:10]] = self._around(key[:10])
        if near and near[0][0] <= key < near[-1][0]:
            for start, name in reversed(near[:-1]):
                if start <= key:
                    return name
        return self._search(key)

    def _around(self, text: str) -> tuple[tuple[str, str], ...]:
        """(midnight key, date) of the day before ``text`` to two days after it."""
        try:
            middle = date.fromisoformat(text)
            days = [middle + timedelta(days=i) for i in (-1, 0, 1, 2)]
        except (ValueError, OverflowError):
            return ()
        keys = [self.boundary(d) for d in days]
        if any(k is None for k in keys):
            return ()
        return tuple((k, d.isoformat()) for k, d in zip(keys, days, strict=True) if k)

    def _search(self, key: str) -> str | None:
        """The last date whose midnight key is <= ``key`` (binary search over all dates)."""
        low, high, found = 1, _MAX_ORDINAL, None
        while low <= high:
            middle = (low + high) // 2
            day = date.fromordinal(middle)
            start = self.boundary(day)
            at_or_before = day.year < 5000 if start is None else start <= key
            if at_or_before:
                found, low = (day if start is not None else None), middle + 1
            else:
                high = middle - 1
        return found.isoformat() if found is not None else None
