"""Time windows of the stats and the report: local days, ISO weeks, and the zone they use.

A window is a half-open UTC interval ``[start, end)`` whose days are counted in a zone, so a
record is in exactly one local day and one ISO week whatever the zone (days across a DST
change have 23 or 25 hours). The zone is ``--tz``, else the config's ``timezone``, else the
machine's own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.log.records import ts_key


class WindowError(LingyiError):
    """A time window, ISO week or time zone given by the user cannot be understood."""


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


def previous_window(window: Window) -> Window:
    """The period just before ``window``, of the same kind: the ISO week before a week, the
    same number of local days before a window of whole days, else the same length of time."""
    zone, days = window.zone, window.days()
    match = _WEEK_RE.match(window.label)
    if match:
        monday = date.fromisocalendar(int(match[1]), int(match[2]), 1) - timedelta(days=7)
        year, week, _ = monday.isocalendar()
        return week_window(week_label(year, week), zone)
    whole = window.start == local_midnight(days[0], zone)
    if whole and window.end == local_midnight(days[-1] + timedelta(days=1), zone):
        first, last = days[0] - timedelta(days=len(days)), days[0] - timedelta(days=1)
        start = local_midnight(first, zone)
        return Window(start, window.start, zone, f"{first} .. {last}")
    start = window.start - (window.end - window.start)
    return Window(start, window.start, zone, f"{ts_key(start)} .. {ts_key(window.start)}")
