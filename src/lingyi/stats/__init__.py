"""Figures over the verification log: one streaming pass, bounded memory.

| module | owns |
|---|---|
| :mod:`~lingyi.stats.window` | time windows: local days, ISO weeks, the zone |
| :mod:`~lingyi.stats.histogram` | the fixed-size latency histogram (percentiles within 0.5%) |
| :mod:`~lingyi.stats.aggregate` | the counters of one pass, the chain checked alongside, merging |
| :mod:`~lingyi.stats.pool` | running a pass here or over chunks in worker processes, progress |
| :mod:`~lingyi.stats.days` | the rollup's unit: one local day's counters per member, in one zone |
| :mod:`~lingyi.stats.builder` | the pass that builds and extends the rollup, its saved state |
| :mod:`~lingyi.stats.store` | the rollup file beside the log: format, seal, anchors to the log |
| :mod:`~lingyi.stats.rollup` | stats from the rollup, brought up to date from its position |
| :mod:`~lingyi.stats.view` | the documented JSON (``docs/stats-json.md``) |

Figures over an edited or damaged log are still produced but say so (``integrity``): bad
records are counted and reported, never silently dropped and never fatal, and
``integrity.chain_ok`` is the verdict of ``lingyi log verify`` on the same log.

Two ways to the same figures: a windowed pass over the whole log (``rollup=False``, and
``lingyi stats --full``), or the rollup beside the log, which reads only what was appended
since it was last brought up to date (``rollup=True``: ``lingyi stats``, the MCP tool, the
weekly report). Both give the same JSON for any log, damaged or not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lingyi._logging import get_logger
from lingyi.config import Config
from lingyi.log.keys import KeyRing
from lingyi.log.records import normalise_ts, ts_key
from lingyi.log.setup import log_keys
from lingyi.redact import redact_value
from lingyi.stats.aggregate import (
    APPROVED,
    DECISIONS,
    FALLBACK,
    INTERCEPTS,
    REJECTED,
    Aggregator,
    Integrity,
    Intercept,
)
from lingyi.stats.histogram import LatencyHistogram
from lingyi.stats.pool import Progress, run_windows
from lingyi.stats.review import EXAMPLE_CODES, review_json
from lingyi.stats.rollup import rollup_aggregates
from lingyi.stats.store import rollup_path
from lingyi.stats.trend import trend_json
from lingyi.stats.view import STATS_SCHEMA, StatsView, appeals_json, counts_json
from lingyi.stats.window import (
    Window,
    WindowError,
    days_window,
    last_full_week,
    local_midnight,
    local_zone,
    parse_instant,
    parse_week,
    previous_window,
    range_window,
    resolve_zone,
    week_label,
    week_window,
    window_from_args,
    zone_name,
)

log = get_logger(__name__)


def compute_stats(
    path: Path,
    window: Window,
    *,
    member: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    keys: KeyRing | None = None,
    rollup: bool = False,
) -> dict[str, Any]:
    """Stats of the log at ``path`` over ``window``, streaming (``docs/stats-json.md``).

    ``workers`` forces the number of chunks (1 = a single pass in this process); by default
    a log over 256 MB is read by worker processes. ``progress(bytes done, bytes total)`` is
    called from this thread as the pass goes on, last with ``(total, total)``. ``keys``:
    the log's keys, so that ``integrity.chain_ok`` checks MACs as ``lingyi log verify`` does.
    ``rollup``: use and bring up to date the rollup beside the log (``<log>.rollup``), so
    that only what was appended since is read; the figures are the same (a window that is not
    made of whole local days, or a rollup that cannot be written, takes the windowed pass).
    The period before the window (:func:`previous_window`) is counted the same way, for the
    ``previous``, ``change`` and ``largest_changes`` fields (one rollup read, or one windowed
    pass, serves both).
    """
    windows = [window, previous_window(window)]
    aggs = None
    if rollup:
        aggs = rollup_aggregates(path, windows, member, keys=keys, workers=workers,
                                 progress=progress)  # fmt: skip
    if aggs is None:
        aggs = _windowed(path, windows, member, workers, progress, keys)
    # Records written before redaction covered a format may still hold it: the figures and
    # the examples they quote are redacted again on the way out (the report reads these).
    result, before = (redact_value(StatsView(a).as_json(), keys=False) for a in aggs)
    # The period before, counted the same way, so that every figure has its change beside it.
    result.update(trend_json(result, before))
    result["log"] = str(path)
    if not result["integrity"]["ok"]:
        log.warning("stats.log_integrity", log=str(path), **_integrity_brief(result))
    return dict(result)


def _windowed(
    path: Path,
    windows: list[Window],
    member: str | None,
    workers: int | None,
    progress: Progress | None,
    keys: KeyRing | None,
) -> list[Aggregator]:
    """The windowed pass over the whole log (``--full``), for all ``windows`` at once."""
    found = run_windows(path, windows, member, workers, progress, keys)
    found.backfill_subjects(path)
    return found.aggregators


def _integrity_brief(result: dict[str, Any]) -> dict[str, int]:
    keys = ("unreadable", "invalid", "chain_breaks", "unknown_schema")
    return {k: int(result["integrity"][k]) for k in keys}


def stats_for(
    config: Config,
    *,
    days: int = 7,
    member: str | None = None,
    tz: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The ``lingyi stats --days N --json`` figures (for the MCP ``verification_stats`` tool),
    from the rollup beside the log."""
    window = days_window(days, resolve_zone(tz, config))
    keys = log_keys(config)
    return compute_stats(
        config.log_path, window, member=member, progress=progress, keys=keys, rollup=True
    )


def with_review(
    figures: dict[str, Any], path: Path, window: Window, member: str | None = None
) -> dict[str, Any]:
    """``figures`` with the ``review`` object: open appeals, examples of the top failing
    checks, policy versions, shadow decisions (one more pass over the log)."""
    codes = [r["code"] for r in figures["top_rejection_reasons"] if r["code"] in figures["by_code"]]
    found = review_json(
        path, window, previous_window(window), member=member, codes=codes[:EXAMPLE_CODES]
    )
    return {**figures, "review": found}


__all__ = [
    "APPROVED",
    "DECISIONS",
    "FALLBACK",
    "INTERCEPTS",
    "REJECTED",
    "STATS_SCHEMA",
    "Aggregator",
    "Integrity",
    "Intercept",
    "LatencyHistogram",
    "Progress",
    "StatsView",
    "Window",
    "WindowError",
    "appeals_json",
    "compute_stats",
    "counts_json",
    "days_window",
    "last_full_week",
    "local_midnight",
    "local_zone",
    "normalise_ts",
    "parse_instant",
    "parse_week",
    "previous_window",
    "range_window",
    "resolve_zone",
    "rollup_path",
    "stats_for",
    "ts_key",
    "week_label",
    "week_window",
    "window_from_args",
    "with_review",
    "zone_name",
]
