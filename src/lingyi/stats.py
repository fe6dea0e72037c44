"""Figures over the verification log: one streaming pass, bounded memory.

``compute_stats`` reads the log line by line and keeps only counters: per decision, per
member, per assertion type, per tool, per check code, per day of the window, a fixed-size
latency histogram and a bounded list of integrity examples. Memory therefore depends on
how many members, tools and codes exist, never on how many records the log holds.

The same pass checks the hash chain (what ``lingyi log verify`` does) so that figures over
an edited log are still produced but say so: bad records are counted and reported, never
silently dropped and never fatal. The JSON shape is documented in ``docs/stats-json.md``;
``STATS_SCHEMA`` changes whenever a field changes meaning or disappears.

Latency percentiles come from a log-bucket histogram (:class:`LatencyHistogram`): buckets
grow by 1% and a value is reported at its bucket's geometric midpoint, so every percentile
is within 0.5% of a latency that really occurred.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import structlog

from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.vlog import GENESIS, SCHEMA_VERSION, record_hash

log = structlog.get_logger(__name__)

STATS_SCHEMA = "lingyi.stats/1"
DECISIONS: tuple[str, ...] = ("approved", "rejected", "fallback")
_DEC_INDEX = {name: i for i, name in enumerate(DECISIONS)}
APPROVED, REJECTED, FALLBACK = 0, 1, 2
MAX_EXAMPLES = 20  # integrity examples kept; the counts stay exact beyond this
TOP_REASONS = 10


class WindowError(LingyiError):
    """A time window, ISO week or time zone given by the user cannot be understood."""


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
)


# --------------------------------------------------------------------------- time windows


def local_zone() -> tzinfo:
    """The machine's zone as a DST-aware zone: ``$TZ``, then /etc/localtime, else UTC."""
    for name in (os.environ.get("TZ", "").lstrip(":"), _etc_localtime_key()):
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return UTC


def _etc_localtime_key() -> str:
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return ""
    _, sep, key = target.partition("zoneinfo/")
    return key if sep else ""


def resolve_zone(name: str | None, config: Config | None = None) -> tzinfo:
    """``--tz`` if given, else the config's ``timezone``, else the machine's zone."""
    chosen = name or (config.timezone if config is not None else "")
    if not chosen:
        return local_zone()
    if chosen.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(chosen)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise WindowError(f"unknown time zone {chosen!r} (use an IANA name)") from exc


def zone_name(zone: tzinfo) -> str:
    key = getattr(zone, "key", None)
    return str(key) if key else str(zone)


def ts_key(moment: datetime) -> str:
    """The log's own timestamp text for ``moment``: comparable as a plain string."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def normalise_ts(value: object) -> str | None:
    """A record's ``ts`` in the canonical form, or None when it is not a timestamp."""
    if not isinstance(value, str):
        return None
    if len(value) == 24 and value[-1] == "Z" and value[10] == "T":
        return value  # the writer's own format: no parsing on the hot path
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts_key(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def local_midnight(day: date, zone: tzinfo) -> datetime:
    """Start of ``day`` in ``zone`` as a UTC instant (DST days have 23 or 25 hours)."""
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


@dataclass(frozen=True)
class Window:
    """A half-open UTC interval [start, end) whose days are counted in ``zone``."""

    start: datetime
    end: datetime
    zone: tzinfo
    label: str

    def days(self) -> list[date]:
        first = self.start.astimezone(self.zone).date()
        last = (self.end - timedelta(microseconds=1)).astimezone(self.zone).date()
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]

    def day_keys(self) -> list[str]:
        """Bucket boundaries: where each local day of the window starts (first = start)."""
        starts = [max(self.start, local_midnight(d, self.zone)) for d in self.days()]
        return [ts_key(s) for s in starts]

    def as_json(self) -> dict[str, Any]:
        return {
            "start": ts_key(self.start),
            "end": ts_key(self.end),
            "tz": zone_name(self.zone),
            "label": self.label,
            "days": len(self.days()),
        }


def _today(zone: tzinfo, now: datetime | None) -> date:
    return (now or datetime.now(UTC)).astimezone(zone).date()


def days_window(days: int, zone: tzinfo, now: datetime | None = None) -> Window:
    """The last ``days`` local calendar days, today included."""
    if days < 1:
        raise WindowError("--days must be at least 1")
    today = _today(zone, now)
    first = today - timedelta(days=days - 1)
    end = local_midnight(today + timedelta(days=1), zone)
    return Window(local_midnight(first, zone), end, zone, f"last {days} days")


def parse_instant(text: str, zone: tzinfo, *, end: bool = False) -> datetime:
    """A DATE (local day; with ``end`` the day is included) or an ISO date-time."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return local_midnight(day + timedelta(days=1 if end else 0), zone)
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise WindowError(f"not a date or date-time: {text!r} (use 2026-11-23)") from exc
    return (moment if moment.tzinfo else moment.replace(tzinfo=zone)).astimezone(UTC)


def range_window(since: str, until: str, zone: tzinfo) -> Window:
    """From the start of ``since`` to the end of ``until`` (both local, inclusive)."""
    start, end = parse_instant(since, zone), parse_instant(until, zone, end=True)
    if end <= start:
        raise WindowError(f"--until {until} is not after --since {since}")
    return Window(start, end, zone, f"{since} .. {until}")


_WEEK_RE = re.compile(r"^(\d{4})-?W(\d{1,2})$", re.IGNORECASE)


def parse_week(text: str) -> tuple[int, int]:
    """``2026-W48`` as (2026, 48); refuses weeks the ISO year does not have."""
    match = _WEEK_RE.match(text.strip())
    if not match:
        raise WindowError(f"not an ISO week: {text!r} (use 2026-W48)")
    year, week = int(match[1]), int(match[2])
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError as exc:
        raise WindowError(f"{year} has no ISO week {week}") from exc
    return year, week


def week_label(year: int, week: int) -> str:
    return f"{year}-W{week:02d}"


def last_full_week(zone: tzinfo, now: datetime | None = None) -> str:
    """The ISO week before the current one, in ``zone``."""
    year, week, _ = (_today(zone, now) - timedelta(days=7)).isocalendar()
    return week_label(year, week)


def week_window(week: str | None, zone: tzinfo, now: datetime | None = None) -> Window:
    """Monday 00:00 to the next Monday 00:00 local time; default the last full week."""
    year, number = parse_week(week or last_full_week(zone, now))
    monday = date.fromisocalendar(year, number, 1)
    start = local_midnight(monday, zone)
    end = local_midnight(monday + timedelta(days=7), zone)
    return Window(start, end, zone, week_label(year, number))


def window_from_args(
    zone: tzinfo,
    *,
    days: int | None = None,
    since: str | None = None,
    until: str | None = None,
    now: datetime | None = None,
) -> Window:
    """The CLI rule: ``--since``/``--until`` (either may be open) or ``--days`` (default 7)."""
    if since is None and until is None:
        return days_window(days or 7, zone, now)
    if days is not None:
        raise WindowError("use --days or --since/--until, not both")
    today = _today(zone, now).isoformat()
    return range_window(since or "1970-01-01", until or today, zone)


# --------------------------------------------------------------------------- latency


class LatencyHistogram:
    """Log-bucket histogram of latencies in milliseconds: fixed size, mergeable.

    Bucket ``i`` holds values in [GROWTH**i, GROWTH**(i+1)); indices are clamped to
    [-700, 2100] (1 µs to ~1.2e9 ms), so at most ~2800 counters exist. Values below 1 µs
    are counted as zero. A percentile is the nearest-rank bucket reported at its
    geometric midpoint and clamped to the exact min/max: relative error < 0.5%.
    """

    GROWTH = 1.01
    _LOG_G = math.log(GROWTH)
    _LOW, _HIGH = -700, 2100

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.zeros = 0
        self.count = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, ms: float) -> None:
        self.count += 1
        self.total += ms
        self.low = min(self.low, ms)
        self.high = max(self.high, ms)
        if ms < 0.001:
            self.zeros += 1
            return
        index = math.floor(math.log(ms) / self._LOG_G)
        self.buckets[min(max(index, self._LOW), self._HIGH)] += 1

    def merge(self, other: LatencyHistogram) -> None:
        self.buckets.update(other.buckets)
        self.zeros += other.zeros
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

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


# --------------------------------------------------------------------------- integrity


_HASH_TAIL = b',"hash":"'  # how VerificationLog ends every line it writes
_TAIL_LEN = len(_HASH_TAIL) + 64 + 2  # ,"hash":"<64 hex>"}


def hash_ok(raw: bytes, record: dict[str, Any]) -> bool:
    """Does ``record`` match its hash? Fast path on the writer's exact bytes.

    The writer hashes canonical(record without hash) and writes those bytes followed by
    ``,"hash":"…"}``; hashing the raw prefix avoids re-serialising every record. A line
    not laid out that way (rewritten by another tool) gets the exact slow check.
    """
    line = raw.rstrip(b"\r\n")
    if line[-_TAIL_LEN:-66] == _HASH_TAIL and line.endswith(b'"}'):
        body = line[:-_TAIL_LEN] + b"}"
        if hashlib.sha256(body).hexdigest().encode() == line[-66:-2]:
            return True
    return record_hash(record) == record.get("hash")


@dataclass
class Integrity:
    """What was wrong with the log, counted exactly, with the first few examples."""

    lines: int = 0
    records: int = 0
    unreadable: int = 0
    invalid: int = 0
    edited: int = 0
    relinked: int = 0
    unhashed: int = 0
    unknown_schema: int = 0
    schema_versions: Counter[str] = field(default_factory=Counter)
    other_kinds: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def note(self, lineno: int, record_id: object, problem: str) -> None:
        if len(self.examples) < MAX_EXAMPLES:
            rid = record_id if isinstance(record_id, str) else None
            self.examples.append({"line": lineno, "id": rid, "problem": problem})

    def as_json(self) -> dict[str, Any]:
        breaks = self.edited + self.relinked
        bad = self.unreadable + self.invalid + breaks + self.unknown_schema
        return {
            "ok": bad == 0,
            "lines": self.lines,
            "records": self.records,
            "unreadable": self.unreadable,
            "invalid": self.invalid,
            "chain_breaks": breaks,
            "edited": self.edited,
            "relinked": self.relinked,
            "unhashed": self.unhashed,
            "unknown_schema": self.unknown_schema,
            "schema_versions": dict(sorted(self.schema_versions.items())),
            "other_kinds": dict(sorted(self.other_kinds.items())),
            "examples": list(self.examples),
        }


class _Chain:
    """Follows ``prev``/``hash`` like the writer does: lines without a hash are skipped."""

    def __init__(self, integrity: Integrity) -> None:
        self.integrity = integrity
        self.prev = GENESIS

    def check(self, lineno: int, raw: bytes, record: dict[str, Any]) -> None:
        stored = record.get("hash")
        if not isinstance(stored, str):
            self.integrity.unhashed += 1  # older schema: written before the chain
            return
        if not hash_ok(raw, record):
            self.integrity.edited += 1
            self.integrity.note(lineno, record.get("id"), "hash does not match (edited)")
        elif record.get("prev") != self.prev:
            self.integrity.relinked += 1
            self.integrity.note(lineno, record.get("id"), "prev does not match (deleted?)")
        self.prev = stored


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RawLine:
    lineno: int
    raw: bytes
    record: dict[str, Any] | None
    error: str | None


def read_lines(path: Path) -> Iterator[RawLine]:
    """Stream the log keeping each line's bytes (the hash fast path needs them)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LingyiError(f"cannot read the verification log {path}: {exc}") from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                yield _decode(lineno, raw)


def _decode(lineno: int, raw: bytes) -> RawLine:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        torn = not raw.endswith(b"\n")
        error = "torn line (no newline; an interrupted write)" if torn else f"not JSON: {exc}"
        return RawLine(lineno, raw, None, error)
    if not isinstance(value, dict):
        return RawLine(lineno, raw, None, "not a JSON object")
    return RawLine(lineno, raw, value, None)


def failed_codes(record: dict[str, Any]) -> list[str]:
    """Codes of the checks that failed in a verification record (any on_fail)."""
    checks = record.get("checks")
    if not isinstance(checks, list):
        return []
    return [str(c.get("code")) for c in checks if isinstance(c, dict) and c.get("passed") is False]


def record_kind(record: dict[str, Any]) -> str:
    """Records without ``kind`` are verifications (the older schema had only those)."""
    kind = record.get("kind", "verification")
    return kind if isinstance(kind, str) else "?"


# --------------------------------------------------------------------------- aggregation


Tally = list[int]  # [approved, rejected, fallback]


def _bump(table: dict[str, Tally], key: str, index: int) -> None:
    tally = table.get(key)
    if tally is None:
        tally = table[key] = [0, 0, 0]
    tally[index] += 1


@dataclass
class _Appeals:
    """Appeal counters for one group (all, a member, a code)."""

    filed: int = 0
    upheld: int = 0
    overturned: int = 0
    overturned_approvals: int = 0


class Aggregator:
    """One streaming pass over the log; ``result()`` gives the stable JSON."""

    def __init__(self, window: Window, member: str | None = None) -> None:
        self.window, self.member = window, member
        self.start_key, self.end_key = ts_key(window.start), ts_key(window.end)
        self.day_keys = window.day_keys()
        self.integrity = Integrity()
        self.chain = _Chain(self.integrity)
        self.groups: dict[str, dict[str, Tally]] = {
            k: {} for k in ("member", "type", "tool", "code", "day")
        }
        self.totals: Tally = [0, 0, 0]
        self.checked: Counter[str] = Counter()
        self.intercepted: Counter[str] = Counter({i.name: 0 for i in INTERCEPTS})
        self.reject_codes: Counter[str] = Counter()
        self.reject_examples: dict[str, str] = {}
        self.latency = LatencyHistogram()
        self.member_latency: dict[str, LatencyHistogram] = {}
        self.appeals: dict[tuple[str, str], _Appeals] = {}
        self._intercept_cache: dict[str, tuple[str, ...]] = {}
        self.pending_subjects: list[dict[str, Any]] = []

    # -- per line ----------------------------------------------------------------------

    def feed(self, line: RawLine) -> None:
        self.integrity.lines += 1
        record = line.record
        if record is None:
            self.integrity.unreadable += 1
            self.integrity.note(line.lineno, None, line.error or "unreadable")
            return
        self.integrity.records += 1
        self.chain.check(line.lineno, line.raw, record)
        self._schema(line.lineno, record)
        kind = record_kind(record)
        if kind == "verification":
            self._verification(line.lineno, record)
        elif kind in ("appeal", "appeal_resolution"):
            self._appeal_record(line.lineno, kind, record)
        else:
            self.integrity.other_kinds[kind] += 1

    def _schema(self, lineno: int, record: dict[str, Any]) -> None:
        version = record.get("v", 0)
        self.integrity.schema_versions[str(version)] += 1
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
            self.integrity.unknown_schema += 1
            self.integrity.note(lineno, record.get("id"), f"unknown schema version {version!r}")

    def _in_window(self, lineno: int, record: dict[str, Any], ts: object) -> str | None:
        key = normalise_ts(ts)
        if key is None:
            self.integrity.invalid += 1
            self.integrity.note(lineno, record.get("id"), f"bad ts {ts!r}")
            return None
        return key if self.start_key <= key < self.end_key else None

    def _verification(self, lineno: int, record: dict[str, Any]) -> None:
        key = self._in_window(lineno, record, record.get("ts"))
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
        self._count(record, str(member), index, key)

    def _count(self, record: dict[str, Any], member: str, index: int, key: str) -> None:
        self.totals[index] += 1
        groups = self.groups
        _bump(groups["member"], member, index)
        _bump(groups["type"], str(record.get("type")), index)
        _bump(groups["day"], str(bisect_right(self.day_keys, key) - 1), index)
        tool = record.get("tool_call")
        if isinstance(tool, dict):
            _bump(groups["tool"], str(tool.get("name")), index)
        self._checks(record, index)
        self._latency(member, record.get("latency_ms"))

    def _checks(self, record: dict[str, Any], index: int) -> None:
        checks = record.get("checks")
        hit: set[str] = set()
        blocking = False
        for check in checks if isinstance(checks, list) else ():
            if not isinstance(check, dict):
                continue
            code = str(check.get("code"))
            self.checked[code] += 1
            if check.get("passed") is False:
                _bump(self.groups["code"], code, index)
                if index != APPROVED:
                    hit.update(self._intercepts_of(code))
                if index == REJECTED and check.get("on_fail") != "warn":
                    blocking = True
                    self._reject_reason(code, check.get("reason"))
        self.intercepted.update(hit)
        if index == REJECTED and not blocking:  # e.g. an older record without checks
            self._reject_reason("(no failed check)", record.get("reason"))

    def _reject_reason(self, code: str, reason: object) -> None:
        self.reject_codes[code] += 1
        if code not in self.reject_examples and isinstance(reason, str):
            self.reject_examples[code] = reason[:200]

    def _intercepts_of(self, code: str) -> tuple[str, ...]:
        names = self._intercept_cache.get(code)
        if names is None:
            names = tuple(i.name for i in INTERCEPTS if i.matches(code))
            self._intercept_cache[code] = names
        return names

    def _latency(self, member: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            return
        self.latency.add(float(value))
        histogram = self.member_latency.get(member)
        if histogram is None:
            histogram = self.member_latency[member] = LatencyHistogram()
        histogram.add(float(value))

    # -- appeals -----------------------------------------------------------------------

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
        """Attribute an appeal to the verification it concerns (window by its ts)."""
        if self._in_window(lineno, record, subject.get("ts")) is None:
            return
        member = str(subject.get("member"))
        if self.member is not None and member != self.member:
            return
        approved = subject.get("decision") == "approved"
        codes = subject.get("codes")
        codes = codes if isinstance(codes, list) else []
        for group in [("all", ""), ("member", member), *(("code", str(c)) for c in codes)]:
            self._appeal_group(group, kind, outcome, approved)

    def _appeal_group(
        self, group: tuple[str, str], kind: str, outcome: object, approved: bool
    ) -> None:
        counts = self.appeals.get(group)
        if counts is None:
            counts = self.appeals[group] = _Appeals()
        if kind == "appeal":
            counts.filed += 1
        elif outcome == "upheld":
            counts.upheld += 1
        elif outcome == "overturned" and approved:
            counts.overturned_approvals += 1  # a verdict that should have blocked
        elif outcome == "overturned":
            counts.overturned += 1

    # -- result ------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        return StatsView(self).as_json()


def _appeal_fields(record: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "ts", "appeal_of", "appeal_id", "outcome")
    return {k: record.get(k) for k in keep}


# --------------------------------------------------------------------------- JSON shape


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


def counts_json(tally: Tally) -> dict[str, Any]:
    """{total, approved, rejected, fallback, blocked, and their rates}."""
    total = sum(tally)
    blocked = tally[REJECTED] + tally[FALLBACK]
    out: dict[str, Any] = {"total": total}
    for name, value in zip(DECISIONS, tally, strict=True):
        out[name] = value
    out["blocked"] = blocked
    for name, value in zip(DECISIONS, tally, strict=True):
        out[f"{name}_rate"] = _rate(value, total)
    out["blocked_rate"] = _rate(blocked, total)
    return out


def appeals_json(counts: _Appeals | None, blocked: int) -> dict[str, Any]:
    """Appeal figures; ``false_positive_rate`` = overturned blocks / all blocks."""
    c = counts or _Appeals()
    resolved = c.upheld + c.overturned + c.overturned_approvals
    return {
        "filed": c.filed,
        "open": max(c.filed - resolved, 0),
        "upheld": c.upheld,
        "overturned": c.overturned,
        "overturned_approvals": c.overturned_approvals,
        "overturn_rate": _rate(c.overturned + c.overturned_approvals, resolved),
        "false_positive_rate": _rate(c.overturned, blocked),
    }


class StatsView:
    """Turns an aggregator's counters into the documented JSON (docs/stats-json.md)."""

    def __init__(self, agg: Aggregator) -> None:
        self.agg = agg

    def as_json(self) -> dict[str, Any]:
        agg = self.agg
        totals = counts_json(agg.totals)
        return {
            "schema": STATS_SCHEMA,
            "generated_at": ts_key(datetime.now(UTC)),
            "window": agg.window.as_json(),
            "member": agg.member,
            "totals": totals,
            "by_member": self._by_member(),
            "by_type": self._plain("type"),
            "by_tool": self._plain("tool"),
            "by_code": self._by_code(),
            "by_day": self._by_day(),
            "intercepted": dict(agg.intercepted),
            "latency_ms": {**agg.latency.summary(), "method": _LATENCY_METHOD},
            "top_rejection_reasons": self._top_reasons(),
            "appeals": appeals_json(agg.appeals.get(("all", "")), totals["blocked"]),
            "integrity": agg.integrity.as_json(),
        }

    def _plain(self, group: str) -> dict[str, Any]:
        table = self.agg.groups[group]
        return {name: counts_json(table[name]) for name in sorted(table)}

    def _by_member(self) -> dict[str, Any]:
        agg, out = self.agg, {}
        names = set(agg.groups["member"]) | {m for g, m in agg.appeals if g == "member"}
        for name in sorted(names):
            counts = counts_json(agg.groups["member"].get(name, [0, 0, 0]))
            latency = agg.member_latency.get(name, LatencyHistogram()).summary()
            appeals = appeals_json(agg.appeals.get(("member", name)), counts["blocked"])
            out[name] = {**counts, "latency_ms": latency, "appeals": appeals}
        return out

    def _by_code(self) -> dict[str, Any]:
        agg, out = self.agg, {}
        names = set(agg.checked) | {c for g, c in agg.appeals if g == "code"}
        for code in sorted(names):
            failed = agg.groups["code"].get(code, [0, 0, 0])
            checked, blocked = agg.checked.get(code, 0), failed[REJECTED] + failed[FALLBACK]
            out[code] = {
                "checked": checked,
                "failed": sum(failed),
                "fail_rate": _rate(sum(failed), checked),
                **dict(zip(DECISIONS, failed, strict=True)),
                "blocked": blocked,
                "appeals": appeals_json(agg.appeals.get(("code", code)), blocked),
            }
        return out

    def _by_day(self) -> list[dict[str, Any]]:
        table = self.agg.groups["day"]
        days = self.agg.window.days()
        return [
            {"date": d.isoformat(), **counts_json(table.get(str(i), [0, 0, 0]))}
            for i, d in enumerate(days)
        ]

    def _top_reasons(self) -> list[dict[str, Any]]:
        agg = self.agg
        ranked = sorted(agg.reject_codes.items(), key=lambda kv: (-kv[1], kv[0]))
        return [
            {"code": code, "count": n, "example": agg.reject_examples.get(code, "")}
            for code, n in ranked[:TOP_REASONS]
        ]


_LATENCY_METHOD = "log-bucket histogram (1% buckets, nearest rank, relative error < 0.5%)"


# --------------------------------------------------------------------------- entry points


def compute_stats(path: Path, window: Window, *, member: str | None = None) -> dict[str, Any]:
    """Stats of the log at ``path`` over ``window`` in one streaming pass."""
    agg = Aggregator(window, member)
    for line in read_lines(path):
        agg.feed(line)
    if agg.pending_subjects:
        _backfill_subjects(path, agg)
    result = agg.result()
    result["log"] = str(path)
    if not result["integrity"]["ok"]:
        log.warning("stats.log_integrity", log=str(path), **_integrity_brief(result))
    return result


def _integrity_brief(result: dict[str, Any]) -> dict[str, int]:
    keys = ("unreadable", "invalid", "chain_breaks", "unknown_schema")
    return {k: int(result["integrity"][k]) for k in keys}


def _backfill_subjects(path: Path, agg: Aggregator) -> None:
    """Appeals written without a snapshot: one more pass finds their verifications.

    Only appeals are kept in memory (never verifications), so this stays bounded by
    the number of such appeals.
    """
    wanted = {str(p.get("appeal_of")) for p in agg.pending_subjects}
    subjects: dict[str, dict[str, Any]] = {}
    for line in read_lines(path):
        record = line.record
        if record and record.get("id") in wanted and record_kind(record) == "verification":
            subjects[str(record["id"])] = subject_of(record)
    for pending in agg.pending_subjects:
        subject = subjects.get(str(pending.get("appeal_of")))
        if subject is None:
            agg.integrity.invalid += 1
            agg.integrity.note(0, pending.get("id"), "appeal of an unknown verification")
            continue
        agg.count_appeal(0, pending["kind"], pending.get("outcome"), subject, pending)


def subject_of(verification: dict[str, Any]) -> dict[str, Any]:
    """What stats need to know about an appealed verification, copied into the appeal."""
    tool = verification.get("tool_call")
    return {
        "ts": verification.get("ts"),
        "member": verification.get("member"),
        "type": verification.get("type"),
        "decision": verification.get("decision"),
        "session": verification.get("session"),
        "tool": tool.get("name") if isinstance(tool, dict) else None,
        "codes": failed_codes(verification),
    }


def stats_for(
    config: Config, *, days: int = 7, member: str | None = None, tz: str | None = None
) -> dict[str, Any]:
    """The ``lingyi stats --days N --json`` figures (for the MCP ``verification_stats`` tool)."""
    window = days_window(days, resolve_zone(tz, config))
    return compute_stats(config.log_path, window, member=member)
