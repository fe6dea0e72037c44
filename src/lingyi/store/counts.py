"""A window's counters as SQL over the index's ``verifications`` and ``checks`` tables.

Every figure of ``lingyi stats`` that is a count (per decision, member, type, tool, check
code and day; the latency histogram, from the bucket column the ingest stores) is a GROUP BY
here, so a week of a big log costs a few scans of its rows in SQLite, not a loop over them
in Python. The few figures that need a record's body (the judge's and the shadow figures,
the codes of uncertain checks, the example of each rejection reason) are read from the
bodies of only the records that have them (:mod:`lingyi.stats.aggregate` does that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NOT_REJECTING = ("warn", "fallback")  # the on_fail of failed checks that cannot reject
# A window, of one member or of all: the WHERE clause and its parameters.
_WHERE = "ts >= ? AND ts < ?"


@dataclass
class WindowCounts:
    """The grouped rows of one window (``None`` names: the record had no such field)."""

    # member, type, tool (None: no tool call), decision, day (index into the day keys), n
    decisions: list[tuple[str, str, str | None, str, int, int]]
    # member, bucket (None: below 1 µs), n, sum of ns, min ms, max ms
    latencies: list[tuple[str, int | None, int, int, float, float]]
    ran: list[tuple[str, bytes, int]]  # member, the codes of the checks (JSON array), n
    # member, code, decision, failed, failed and blocking (could have rejected), the first
    # line of a rejection it explains
    failed: list[tuple[str, str, str, int, int, int | None]]
    blocked: list[tuple[int, str]]  # line, code: failed checks of blocked verifications
    unexplained: tuple[int, int | None]  # rejections no failed blocking check explains, first


def _window(start: str, end: str, member: str | None) -> tuple[str, tuple[Any, ...]]:
    if member is None:
        return _WHERE, (start, end)
    return _WHERE + " AND member = ?", (start, end, member)


def _day(day_keys: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The index of the day a ts falls in (the last day start at or before it)."""
    if len(day_keys) < 2:
        return "0", ()
    whens = " ".join(f"WHEN ts >= ? THEN {i}" for i in range(len(day_keys) - 1, 0, -1))
    return f"CASE {whens} ELSE 0 END", tuple(reversed(day_keys[1:]))


def window_counts(
    db: sqlite3.Connection, start: str, end: str, member: str | None, day_keys: Sequence[str]
) -> WindowCounts:
    where, params = _window(start, end, member)
    day, day_params = _day(day_keys)
    decisions = db.execute(_DECISIONS.format(day=day, where=where), day_params + params)
    latencies = [_latency(row) for row in db.execute(_LATENCY.format(where=where), params)]
    return WindowCounts(
        decisions.fetchall(),
        latencies,
        db.execute(_RAN.format(where=where), params).fetchall(),
        db.execute(_FAILED.format(where=where), params).fetchall(),
        db.execute(f"{_BLOCKED} WHERE {where} AND decision <> 'approved'", params).fetchall(),
        db.execute(_UNEXPLAINED.format(what="COUNT(*), MIN(line)", where=where), params).fetchone(),
    )


_DECISIONS = """SELECT COALESCE(member, 'None'), COALESCE(type, 'None'),
    CASE WHEN tooled THEN COALESCE(tool, 'None') END, decision, {day}, COUNT(*)
    FROM verifications WHERE {where} GROUP BY 1, 2, 3, 4, 5"""
_LATENCY = """SELECT COALESCE(member, 'None'), bucket, COUNT(*),
    COALESCE(SUM(CASE WHEN typeof(ns) = 'integer' THEN ns END), 0), MIN(ms), MAX(ms),
    group_concat(CASE WHEN typeof(ns) = 'text' THEN ns END, ' ')
    FROM verifications WHERE {where} AND ms IS NOT NULL GROUP BY 1, 2"""
_RAN = """SELECT COALESCE(member, 'None'), ran, COUNT(*) FROM verifications
    WHERE {where} AND ran IS NOT NULL GROUP BY 1, 2"""
_FAILED = """SELECT COALESCE(member, 'None'), code, decision, COUNT(*), SUM(blocking),
    MIN(CASE WHEN blocking AND decision = 'rejected' THEN line END)
    FROM checks WHERE {where} GROUP BY 1, 2, 3"""
_BLOCKED = "SELECT line, code FROM checks"
_UNEXPLAINED = """SELECT {what} FROM verifications AS v
    WHERE {where} AND decision = 'rejected' AND ran IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM checks AS c WHERE c.ts = v.ts AND c.line = v.line AND c.blocking)"""


def _latency(row: tuple[Any, ...]) -> tuple[str, int | None, int, int, float, float]:
    """One bucket's row, the sums of ns too big for SQLite's integers added in Python."""
    member, bucket, count, total, low, high, big = row
    total += sum(int(ns) for ns in (big or "").split())
    return member, bucket, count, total, low, high


def next_rejection(
    db: sqlite3.Connection, start: str, end: str, member: str | None, code: str | None,
    after: int,
) -> int | None:  # fmt: skip
    """The first line after ``after`` of the window's rejections that a blocking failed
    check of ``code`` explains (None: that no blocking failed check explains)."""
    where, params = _window(start, end, member)
    if code is None:
        sql = _UNEXPLAINED.format(what="MIN(line)", where=where) + " AND line > ?"
    else:
        sql = f"SELECT MIN(line) FROM checks WHERE {where} AND decision = 'rejected'"
        sql, params = sql + " AND blocking AND code = ? AND line > ?", (*params, code)
    (line,) = db.execute(sql, (*params, after)).fetchone()
    return None if line is None else int(line)
