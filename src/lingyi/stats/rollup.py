"""Stats that do not reread the past: the rollup beside the log, brought up to date on read.

The rollup (:mod:`lingyi.stats.store`) holds, per zone and local day, the counters of each
member's verifications and of the appeals of that day's verifications, and, for the whole
log, the chain verifier's state and the integrity findings, up to a line boundary of the
log. When stats are asked for:

1. the rollup is read, and used only if its seal verifies and the log still holds the lines
   it was built from (:func:`lingyi.stats.store.load`); otherwise, or for a zone it does not
   keep, it is rebuilt from the whole log (worker processes for a big log, as a windowed
   pass);
2. the lines appended since its position are counted (the chain is checked on from where it
   stood), and it is saved again, up to the last whole line;
3. a torn last line (an interrupted write) is counted for this answer only, never saved:
   the writer may still complete or isolate it;
4. the window's days are added up into an :class:`~lingyi.stats.aggregate.Aggregator`,
   which the stats JSON is made from exactly as after a windowed pass.

Only windows of whole local days in their zone are served this way (``--days``, weeks,
``--since``/``--until`` with dates); a window cut at another time of day, and a log whose
rollup cannot be written (a directory the reader may not write), take the windowed pass.
``lingyi stats --full`` always does: it must give the same figures.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from lingyi._logging import get_logger
from lingyi.log.keys import KeyRing
from lingyi.log.reader import raw_lines
from lingyi.log.records import ts_key
from lingyi.stats import store
from lingyi.stats.aggregate import Aggregator, Appeals, find_subjects
from lingyi.stats.builder import RollupBuilder
from lingyi.stats.days import ZoneDays
from lingyi.stats.pool import PROGRESS_BYTES, Progress, run_rollup_pass
from lingyi.stats.window import Window, WindowError, resolve_zone, zone_name

log = get_logger(__name__)

MAX_ZONES = 4  # zones kept in one rollup; the one used least recently goes first


def rollup_aggregate(
    path: Path,
    window: Window,
    member: str | None = None,
    *,
    keys: KeyRing | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Aggregator | None:
    """The aggregator of ``window`` from the rollup of ``path``, brought up to date first.

    None when the rollup cannot serve this window (not whole local days) or cannot be kept
    (it would have to be rebuilt, and cannot be written): the caller makes a windowed pass.
    A valid rollup that the caller may not write is used, and brought up to date in memory.
    """
    found = rollup_aggregates(path, [window], member, keys=keys, workers=workers, progress=progress)
    return None if found is None else found[0]


def rollup_aggregates(
    path: Path,
    windows: Sequence[Window],
    member: str | None = None,
    *,
    keys: KeyRing | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> list[Aggregator] | None:
    """:func:`rollup_aggregate` for several windows of one zone, the rollup brought up to date
    once (a week and the week before it)."""
    zone = ZoneDays(zone_name(windows[0].zone), windows[0].zone)
    if not path.is_file() or not _named(zone) or not all(whole_days(w, zone) for w in windows):
        return None  # no log (no rollup made for it), or a window the rollup cannot serve
    loaded = store.load(path, keys)
    builder, position, why = _usable(loaded, zone, windows)
    if builder is None:
        if not _writable(path):
            return None
        builder, position = _rebuild(path, zone, loaded, keys, workers, progress, why)
        changed = True
    else:
        position, changed = _advance(builder, path, position, progress)
    _keep_first(builder, zone.name)
    if changed and _writable(path):  # a reader who may not write still uses a valid one
        _save(path, builder, position, keys)
    _read_tail(builder, path, position)
    return [aggregate(builder, w, member) for w in windows]


def _named(zone: ZoneDays) -> bool:
    """Can the zone be found again by its name (an IANA zone or UTC, not a bare offset)?"""
    try:
        return zone_name(resolve_zone(zone.name)) == zone.name
    except WindowError:
        return False


def whole_days(window: Window, zone: ZoneDays) -> bool:
    """Does ``window`` start and end at local midnights of its zone?"""
    days = window.days()
    first, after = zone.boundary(days[0]), zone.boundary(days[-1] + timedelta(days=1))
    return ts_key(window.start) == first and ts_key(window.end) == after


def _usable(
    loaded: store.Loaded | str, zone: ZoneDays, windows: Sequence[Window]
) -> tuple[RollupBuilder | None, store.Position, str]:
    if isinstance(loaded, str):
        return None, store.Position(), loaded
    days = loaded.builder.zones.get(zone.name)
    if days is None:
        return None, loaded.position, f"no days in zone {zone.name} yet"
    for day in (d for w in windows for d in w.days()):
        kept = days.day(day.isoformat())
        bounds = (zone.boundary(day), zone.boundary(day + timedelta(days=1)))
        if kept is not None and (kept.start, kept.end) != bounds:
            return None, loaded.position, f"the zone {zone.name} changed its rules"
    return loaded.builder, loaded.position, ""


def _writable(path: Path) -> bool:
    target = store.rollup_path(path)
    if target.exists():
        return os.access(target, os.W_OK) and os.access(path.parent, os.W_OK)
    return os.access(path.parent, os.W_OK)


def _rebuild(
    path: Path,
    zone: ZoneDays,
    loaded: store.Loaded | str,
    keys: KeyRing | None,
    workers: int | None,
    progress: Progress | None,
    why: str,
) -> tuple[RollupBuilder, store.Position]:
    """A new rollup of the whole log for ``zone`` and the zones the old one kept."""
    zones = [zone]
    if isinstance(loaded, store.Loaded):
        kept = [z for z in loaded.builder.zones.values() if z.name != zone.name]
        zones += [ZoneDays(z.name, z.zone) for z in kept[: MAX_ZONES - 1]]
    end = _whole_lines_end(path)
    log.info("stats.rollup_rebuild", log=str(path), reason=why, bytes=end)
    builder, lines = run_rollup_pass(path, zones, end, workers, progress, keys)
    _resolve_subjects(builder, path, end)
    position = store.Position(offset=end, lines=lines)
    position, _ = _advance(builder, path, position, None)
    return builder, _anchored(path, builder, position)


def _whole_lines_end(path: Path) -> int:
    """Where the log's whole lines end (before a torn last line, if any)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return 0
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return size
            return store.last_line_start(handle, size)
    except FileNotFoundError:
        return 0


def _advance(
    builder: RollupBuilder, path: Path, position: store.Position, progress: Progress | None
) -> tuple[store.Position, bool]:
    """Count the whole lines appended since ``position``; the new position, and if it moved."""
    offset, lines = position.offset, position.lines
    total = max(_size(path) - offset, 0)
    reported = 0
    for lineno, at, raw in raw_lines(path, position.offset):
        if not raw.endswith(b"\n"):
            break  # a torn last line: counted for this answer only (_read_tail)
        if raw.strip():
            builder.feed_raw(position.lines + lineno, raw)
        offset, lines = at + len(raw), position.lines + lineno
        if progress is not None and offset - position.offset - reported >= PROGRESS_BYTES:
            reported = offset - position.offset
            progress(min(reported, total), total)
    if progress is not None:
        progress(total, total)
    if offset == position.offset:
        return position, False
    _resolve_subjects(builder, path, offset)
    moved = store.Position(offset, lines, builder.last_seq, builder.last_hash)
    return _anchored(path, builder, moved), True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _anchored(path: Path, builder: RollupBuilder, position: store.Position) -> store.Position:
    position.seq, position.hash = builder.last_seq, builder.last_hash
    try:
        with path.open("rb") as handle:
            position.last = store.last_line(handle, position.offset)
            position.anchors = store.make_anchors(handle, position.offset)
    except FileNotFoundError:
        position.last, position.anchors = None, []
    return position


def _resolve_subjects(builder: RollupBuilder, path: Path, end: int) -> None:
    """Find the verifications of appeals without a snapshot that no line read so far named."""
    wanted = {str(p.get("appeal_of")) for p in builder.pending_subjects}
    missing = wanted - set(builder.subjects)
    if missing:
        builder.subjects.update(find_subjects(path, missing, 0, end))


def _keep_first(builder: RollupBuilder, name: str) -> None:
    """The zone just used goes first; beyond :data:`MAX_ZONES`, the last used are dropped."""
    order = [name, *(z for z in builder.zones if z != name)][:MAX_ZONES]
    builder.zones = {z: builder.zones[z] for z in order}


def _save(
    path: Path, builder: RollupBuilder, position: store.Position, keys: KeyRing | None
) -> None:
    try:
        store.save(path, builder, position, keys)
    except OSError as exc:  # a cache: the figures are right without it, only slower next time
        log.warning("stats.rollup_not_saved", rollup=str(store.rollup_path(path)), error=str(exc))


def _read_tail(builder: RollupBuilder, path: Path, position: store.Position) -> None:
    """Count what follows the rollup's position (a torn line), for this answer only."""
    fed = False
    for lineno, _, raw in raw_lines(path, position.offset):
        if raw.strip():
            builder.feed_raw(position.lines + lineno, raw)
            fed = True
    if fed:
        _resolve_subjects(builder, path, _size(path))


# --------------------------------------------------------------------------- a window


def aggregate(builder: RollupBuilder, window: Window, member: str | None) -> Aggregator:
    """The aggregator a windowed pass would give, added up from the rollup's days."""
    agg = Aggregator(window, member)
    agg.chain = builder.chain
    agg.integrity = copy.deepcopy(builder.integrity)
    zone = builder.zones[zone_name(window.zone)]
    undecided: list[tuple[int, str | None]] = []
    for index, day_date in enumerate(window.days()):
        day = zone.day(day_date.isoformat())
        if day is None:
            continue
        for (name, is_text), cell in day.cells.items():
            if member is not None and not (is_text and name == member):
                continue
            agg.add(cell)
            agg.add_member_codes(name, cell.groups["code"], cell.checked)
            tally = agg.day_tallies[index]
            agg.day_tallies[index] = [a + b for a, b in zip(tally, cell.totals, strict=True)]
            agg.integrity.invalid += cell.invalid
            undecided += cell.invalid_examples
        for name, (every, by_code) in day.appeals.items():
            if member is None or name == member:
                _add_appeals(agg, name, every, by_code)
        for (name, is_text), events in day.approvals.items():
            if member is None or (is_text and name == member):
                agg.approvals.update(events)
    for lineno, rid in sorted(undecided, key=lambda e: e[0]):
        agg.integrity.note(lineno, rid, "no valid decision")
    agg.pending_subjects = list(builder.pending_subjects)
    agg.apply_subjects(builder.subjects)
    return agg


def _add_appeals(agg: Aggregator, member: str, every: Appeals, by_code: dict[str, Appeals]) -> None:
    for group in (("all", ""), ("member", member)):
        agg.appeals.setdefault(group, Appeals()).add(every)
    for code, counts in by_code.items():
        agg.appeals.setdefault(("code", code), Appeals()).add(counts)
