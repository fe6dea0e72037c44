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
import multiprocessing
import os
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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
_NOT_REJECTING = ("warn", "fallback")  # failed checks that cannot have caused a rejection


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
    """The CLI rule: ``--since`` [``--until``, default today] or ``--days`` (default 7)."""
    if since is None and until is None:
        return days_window(days or 7, zone, now)
    if days is not None:
        raise WindowError("use --days or --since/--until, not both")
    if since is None:
        raise WindowError("--until needs --since (or use --days)")
    return range_window(since, until or _today(zone, now).isoformat(), zone)


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

    @classmethod
    def bucket_of(cls, ms: float) -> int | None:
        """The bucket of ``ms``; None for the zero bucket (below 1 µs)."""
        if ms < 0.001:
            return None
        index = math.floor(math.log(ms) / cls._LOG_G)
        return min(max(index, cls._LOW), cls._HIGH)

    def add(self, ms: float, bucket: int | None = None) -> None:
        """Count ``ms``; ``bucket`` may be passed when already computed for ``ms``."""
        self.count += 1
        self.total += ms
        if ms < self.low:
            self.low = ms
        if ms > self.high:
            self.high = ms
        index = self.bucket_of(ms) if bucket is None else bucket
        if index is None:
            self.zeros += 1
        else:
            self.buckets[index] += 1

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


_INTEGRITY_COUNTS = (
    "lines",
    "records",
    "unreadable",
    "invalid",
    "edited",
    "relinked",
    "unhashed",
    "unknown_schema",
)


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
        if len(self.examples) < MAX_EXAMPLES or lineno < self.examples[-1]["line"]:
            rid = record_id if isinstance(record_id, str) else None
            self.examples.append({"line": lineno, "id": rid, "problem": problem})
            self.examples = sorted(self.examples, key=lambda e: e["line"])[:MAX_EXAMPLES]

    def merge(self, other: Integrity, line_offset: int) -> None:
        for name in _INTEGRITY_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.schema_versions.update(other.schema_versions)
        self.other_kinds.update(other.other_kinds)
        moved = [{**e, "line": e["line"] + line_offset} for e in other.examples]
        self.examples = sorted(self.examples + moved, key=lambda e: e["line"])[:MAX_EXAMPLES]

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
    """Follows ``prev``/``hash`` like the writer does: lines without a hash are skipped.

    A chunk read by a worker starts mid-log with ``prev=None``: its first link is kept in
    ``first_link`` and checked when the chunks are merged in order.
    """

    def __init__(self, integrity: Integrity, prev: str | None = GENESIS) -> None:
        self.integrity = integrity
        self.prev = prev
        self.first_link: tuple[int, object, object] | None = None

    def check(self, lineno: int, raw: bytes, record: dict[str, Any], verified: bool) -> None:
        """``verified``: the caller already matched the hash on the raw bytes."""
        stored = record.get("hash")
        if not isinstance(stored, str):
            self.integrity.unhashed += 1  # older schema: written before the chain
            return
        if not (verified or hash_ok(raw, record)):
            self.integrity.edited += 1
            self.integrity.note(lineno, record.get("id"), "hash does not match (edited)")
        elif self.prev is None:
            self.first_link = (lineno, record.get("id"), record.get("prev"))
        elif record.get("prev") != self.prev:
            self.link_broken(lineno, record.get("id"))
        self.prev = stored

    def link_broken(self, lineno: int, record_id: object) -> None:
        self.integrity.relinked += 1
        self.integrity.note(lineno, record_id, "prev does not match (deleted?)")


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RawLine:
    lineno: int
    raw: bytes
    record: dict[str, Any] | None
    error: str | None


def raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Stream the non-empty lines of the log with their numbers, as bytes."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LingyiError(f"cannot read the verification log {path}: {exc}") from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                yield lineno, raw


def read_lines(path: Path) -> Iterator[RawLine]:
    """Stream the log as decoded lines, keeping the bytes (the hash fast path needs them)."""
    for lineno, raw in raw_lines(path):
        yield decode_line(lineno, raw)


def decode_line(lineno: int, raw: bytes) -> RawLine:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        torn = not raw.endswith(b"\n")
        error = "torn line (no newline; an interrupted write)" if torn else f"not JSON: {exc}"
        return RawLine(lineno, raw, None, error)
    if not isinstance(value, dict):
        return RawLine(lineno, raw, None, "not a JSON object")
    return RawLine(lineno, raw, value, None)


# The writer's canonical layout ends every record with ts, (type), v and the hash; keys
# are sorted, so these are top-level keys whenever they sit right before the hash.
_TAIL_RE = re.compile(
    rb',"ts":"([^"\\]{1,40})"(?:,"type":"[a-z_]{1,40}")?,"v":(\d{1,6}),'
    rb'"hash":"([0-9a-f]{64})"\}\r?\n?\Z'
)
_KIND = b'"kind":"'
_VER = b'verification"'


def tail_match(raw: bytes) -> re.Match[bytes] | None:
    """The writer's tail (ts, type, v, hash) of ``raw``, looked for in its last bytes only."""
    return _TAIL_RE.search(raw, max(0, len(raw) - 240))


def skimmable(raw: bytes, match: re.Match[bytes], prev: str | None) -> bool:
    """Is ``raw`` a verification exactly as VerificationLog wrote it, linked to ``prev``?

    Most records of a big log fall outside the window asked for; this checks their hash
    and link without the cost of parsing them. Anything unusual (another layout, a hash
    or link that does not match, a ``kind`` other than verification, a nested ``kind``)
    answers False and the caller parses the line properly.
    """
    digest = hashlib.sha256(memoryview(raw)[: match.start(3) - len(_HASH_TAIL)])
    digest.update(b"}")
    if prev is None or digest.hexdigest().encode() != match[3]:
        return False
    if b'"prev":"%s"' % prev.encode() not in raw:
        return False
    kind = raw.find(_KIND)
    return kind < 0 or (raw.startswith(_VER, kind + 8) and raw.find(_KIND, kind + 8) < 0)


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


def _add(a: Tally, b: Tally) -> Tally:
    return [x + y for x, y in zip(a, b, strict=True)]


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

    def __init__(
        self, window: Window, member: str | None = None, prev: str | None = GENESIS
    ) -> None:
        self.window, self.member = window, member
        self.start_key, self.end_key = ts_key(window.start), ts_key(window.end)
        self.day_keys = window.day_keys()
        self.integrity = Integrity()
        self.chain = _Chain(self.integrity, prev)
        self.groups: dict[str, dict[str, Tally]] = {
            k: {} for k in ("member", "type", "tool", "code")
        }
        self.day_tallies: list[Tally] = [[0, 0, 0] for _ in self.day_keys]
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

    def feed_raw(self, lineno: int, raw: bytes) -> None:
        """Count one line; lines outside the window are only checked, not parsed."""
        match = tail_match(raw)
        if (
            match is not None
            and int(match[2]) <= SCHEMA_VERSION
            and self._outside(match[1])
            and skimmable(raw, match, self.chain.prev)
        ):
            self.integrity.lines += 1
            self.integrity.records += 1
            self.integrity.schema_versions[match[2].decode()] += 1
            self.chain.prev = match[3].decode()
            return
        self.feed(decode_line(lineno, raw))

    def _outside(self, ts: bytes) -> bool:
        key = normalise_ts(ts.decode())
        return key is not None and not self.start_key <= key < self.end_key

    def feed(self, line: RawLine, verified: bool = False) -> None:
        self.integrity.lines += 1
        record = line.record
        if record is None:
            self.integrity.unreadable += 1
            self.integrity.note(line.lineno, None, line.error or "unreadable")
            return
        self.integrity.records += 1
        self.chain.check(line.lineno, line.raw, record, verified)
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
        self.day_tallies[bisect_right(self.day_keys, key) - 1][index] += 1
        tool = record.get("tool_call")
        if isinstance(tool, dict):
            _bump(groups["tool"], str(tool.get("name")), index)
        checks = record.get("checks")
        if isinstance(checks, list):
            failed = self._checked(checks)
            if failed or index == REJECTED:
                self._failures(record, failed, index)
        self._latency(member, record.get("latency_ms"))

    def _checked(self, checks: list[Any]) -> list[dict[str, Any]]:
        """Count every check that ran; return the failed ones (the hot loop: kept lean)."""
        checked, failed = self.checked, []
        for check in checks:
            if isinstance(check, dict):
                code = check.get("code")
                checked[code if isinstance(code, str) else str(code)] += 1
                if check.get("passed") is False:
                    failed.append(check)
        return failed

    def _failures(self, record: dict[str, Any], failed: list[dict[str, Any]], index: int) -> None:
        hit: set[str] = set()
        blocking = False
        for check in failed:
            code = str(check.get("code"))
            _bump(self.groups["code"], code, index)
            if index != APPROVED:
                hit.update(self._intercepts_of(code))
            if index == REJECTED and check.get("on_fail") not in _NOT_REJECTING:
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
        if value.__class__ not in (int, float) or value != value:  # not bool, not NaN
            return
        ms = float(value)
        bucket = LatencyHistogram.bucket_of(ms)
        self.latency.add(ms, bucket)
        histogram = self.member_latency.get(member)
        if histogram is None:
            histogram = self.member_latency[member] = LatencyHistogram()
        histogram.add(ms, bucket)

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

    # -- merging chunks ----------------------------------------------------------------

    def merge(self, other: Aggregator, line_offset: int) -> None:
        """Add the counters of the chunk that follows this one in the log."""
        link = other.chain.first_link
        if link is not None and link[2] != self.chain.prev:
            self.chain.link_broken(link[0] + line_offset, link[1])
        self.chain.prev = other.chain.prev or self.chain.prev
        self.integrity.merge(other.integrity, line_offset)
        for group, table in other.groups.items():
            for name, tally in table.items():
                for index, value in enumerate(tally):
                    self.groups[group].setdefault(name, [0, 0, 0])[index] += value
        self.totals = _add(self.totals, other.totals)
        self.day_tallies = [
            _add(a, b) for a, b in zip(self.day_tallies, other.day_tallies, strict=True)
        ]
        self._merge_counters(other)

    def _merge_counters(self, other: Aggregator) -> None:
        self.checked.update(other.checked)
        self.intercepted.update(other.intercepted)
        self.reject_codes.update(other.reject_codes)
        for code, text in other.reject_examples.items():
            self.reject_examples.setdefault(code, text)
        self.latency.merge(other.latency)
        for member, histogram in other.member_latency.items():
            self.member_latency.setdefault(member, LatencyHistogram()).merge(histogram)
        for key, counts in other.appeals.items():
            mine = self.appeals.setdefault(key, _Appeals())
            for name in ("filed", "upheld", "overturned", "overturned_approvals"):
                setattr(mine, name, getattr(mine, name) + getattr(counts, name))
        self.pending_subjects.extend(other.pending_subjects)

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
        days = zip(self.agg.window.days(), self.agg.day_tallies, strict=True)
        return [{"date": d.isoformat(), **counts_json(tally)} for d, tally in days]

    def _top_reasons(self) -> list[dict[str, Any]]:
        agg = self.agg
        ranked = sorted(agg.reject_codes.items(), key=lambda kv: (-kv[1], kv[0]))
        return [
            {"code": code, "count": n, "example": agg.reject_examples.get(code, "")}
            for code, n in ranked[:TOP_REASONS]
        ]


_LATENCY_METHOD = "log-bucket histogram (1% buckets, nearest rank, relative error < 0.5%)"


# --------------------------------------------------------------------------- entry points


PARALLEL_MIN_BYTES = 256 << 20  # below this, starting workers costs more than it saves
CHUNK_BYTES = 32 << 20
MAX_WORKERS = 8


def compute_stats(
    path: Path, window: Window, *, member: str | None = None, workers: int | None = None
) -> dict[str, Any]:
    """Stats of the log at ``path`` over ``window``, streaming.

    A big log (over 256 MB, about 170k records) is cut into byte ranges at line starts,
    read by worker processes (one per CPU, at most 8), and the per-chunk counters are
    merged in order (the chain link between chunks included), so
    the result is the one a single pass gives. ``workers`` forces the number of chunks
    (1 = a single pass in this process); by default it depends on the size and the CPUs.
    """
    agg = _aggregate(path, window, member, workers)
    if agg.pending_subjects:
        _backfill_subjects(path, agg)
    result = agg.result()
    result["log"] = str(path)
    if not result["integrity"]["ok"]:
        log.warning("stats.log_integrity", log=str(path), **_integrity_brief(result))
    return result


@dataclass(frozen=True)
class _Task:
    path: Path
    start: int
    end: int | None  # None: to the end of the file, including lines appended meanwhile
    window: Window
    member: str | None


def _scan(task: _Task) -> tuple[Aggregator, int]:
    """Count one byte range of the log; returns the counters and its physical lines."""
    agg = Aggregator(task.window, task.member, GENESIS if task.start == 0 else None)
    lineno, position = 0, task.start
    with task.path.open("rb") as handle:
        handle.seek(task.start)
        for raw in handle:
            if task.end is not None and position >= task.end:
                break
            position += len(raw)
            lineno += 1
            if raw.strip():
                agg.feed_raw(lineno, raw)
    return agg, lineno


def _aggregate(path: Path, window: Window, member: str | None, workers: int | None) -> Aggregator:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Aggregator(window, member)  # no log yet: every figure is zero
    count = workers or _auto_workers(size)
    tasks = [_Task(path, a, b, window, member) for a, b in _split(path, size, count)]
    if len(tasks) == 1:
        return _scan(tasks[0])[0]
    return _merge_parts(_run_chunks(tasks))


def _run_chunks(tasks: list[_Task]) -> list[tuple[Aggregator, int]]:
    try:
        return _run_workers(tasks)
    except (OSError, BrokenProcessPool) as exc:  # e.g. a sandbox that allows no processes
        log.warning("stats.workers_failed", error=str(exc))
        return [_scan(t) for t in tasks]


def _run_workers(tasks: list[_Task]) -> list[tuple[Aggregator, int]]:
    # spawn, not fork: the MCP server calls stats from a process with threads.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(tasks), mp_context=context) as pool:
        return list(pool.map(_scan, tasks))


def _auto_workers(size: int) -> int:
    if size < PARALLEL_MIN_BYTES:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, MAX_WORKERS, size // CHUNK_BYTES))


def _split(path: Path, size: int, parts: int) -> list[tuple[int, int | None]]:
    """Byte ranges that start at line starts; the last one is open-ended."""
    starts = [0]
    with path.open("rb") as handle:
        for i in range(1, parts):
            handle.seek(size * i // parts)
            handle.readline()  # skip to the start of the next line
            if starts[-1] < handle.tell() < size:
                starts.append(handle.tell())
    ends: list[int | None] = [*starts[1:], None]
    return list(zip(starts, ends, strict=True))


def _merge_parts(parts: list[tuple[Aggregator, int]]) -> Aggregator:
    total, offset = parts[0][0], parts[0][1]
    for agg, lines in parts[1:]:
        total.merge(agg, offset)
        offset += lines
    return total


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
