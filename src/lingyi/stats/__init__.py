"""Figures over the verification log, read from the index beside it (:mod:`lingyi.store`).

| module | owns |
|---|---|
| :mod:`~lingyi.stats.window` | time windows: local days, ISO weeks, the zone |
| :mod:`~lingyi.stats.histogram` | the fixed-size latency histogram (percentiles within 0.5%) |
| :mod:`~lingyi.stats.aggregate` | the counters of one window, fed the index's rows |
| :mod:`~lingyi.stats.view` | the documented JSON (``docs/stats-json.md``) |

The index holds only records the chain verifier authenticated, so a forged or stripped
record is in no figure; what is wrong with the log is reported (``integrity``), never
fatal, and ``integrity.chain_ok`` is the verdict of ``lingyi log verify`` on the same lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lingyi._logging import get_logger
from lingyi.config import Config
from lingyi.log.keys import KeyRing
from lingyi.log.records import normalise_ts, record_kind, subject_of, ts_key
from lingyi.log.setup import log_keys, store_path
from lingyi.redact import redact_value
from lingyi.stats.aggregate import (
    APPROVED,
    DECISIONS,
    FALLBACK,
    INTERCEPTS,
    REJECTED,
    Aggregator,
    Intercept,
    integrity_json,
)
from lingyi.stats.histogram import LatencyHistogram
from lingyi.stats.review import EXAMPLE_CODES, review_json
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
from lingyi.store import Store, open_store

log = get_logger(__name__)


def compute_stats(
    path: Path,
    window: Window,
    *,
    member: str | None = None,
    keys: KeyRing | None = None,
    index: Path | None = None,
    checkpoints: Path | None = None,
    rebuild: bool = False,
) -> dict[str, Any]:
    """Stats of the log at ``path`` over ``window`` (``docs/stats-json.md``), from its index
    (at ``index``, default beside the log), brought up to date first; ``rebuild``: made
    again from the whole log (``lingyi stats --full``). ``keys``: the log's keys, so that
    ``integrity.chain_ok`` checks MACs as ``lingyi log verify`` does. The period before the
    window (:func:`previous_window`) is counted too, for ``previous``, ``change`` and
    ``largest_changes``. ``checkpoints``: the log's checkpoint file, checked as ``lingyi log
    verify`` checks it (``integrity.verified`` is its verdict)."""
    store = open_store(path, keys, index, checkpoints=checkpoints, rebuild=rebuild)
    try:
        integrity = integrity_json(store.summary)
        aggs = [_count(store, w, member) for w in (window, previous_window(window))]
    finally:
        store.close()
    # Records written before redaction covered a format may still hold it: the figures and
    # the examples they quote are redacted again on the way out (the report reads these).
    result, before = (redact_value(StatsView(a, integrity).as_json(), keys=False) for a in aggs)
    # The period before, counted the same way, so that every figure has its change beside it.
    result.update(trend_json(result, before))
    result["log"] = str(path)
    if not result["integrity"]["ok"]:
        log.warning("stats.log_integrity", log=str(path), **_integrity_brief(result))
    return dict(result)


def _count(store: Store, window: Window, member: str | None) -> Aggregator:
    """The counters of one window, from the index's rows."""
    agg = Aggregator(window, member)
    start, end = ts_key(window.start), ts_key(window.end)
    agg.from_index(store)
    for _, record in store.outcomes(start, end, member):
        agg.call_outcome(record)
    for _, record in store.approvals(start):
        agg.approval(record)
    for _, record in store.appeals():
        subject = record.get("subject")
        if not isinstance(subject, dict):  # written without a snapshot: looked up
            target = store.find(str(record.get("appeal_of")))
            if target is None or record_kind(target) != "verification":
                continue
            subject = subject_of(target).model_dump()
        agg.appeal(record_kind(record), record.get("outcome"), subject)
    return agg


def _integrity_brief(result: dict[str, Any]) -> dict[str, int]:
    keys = ("unreadable", "invalid", "chain_breaks", "unknown_schema")
    return {k: int(result["integrity"][k]) for k in keys}


def stats_for(
    config: Config,
    *,
    days: int = 7,
    member: str | None = None,
    tz: str | None = None,
) -> dict[str, Any]:
    """The ``lingyi stats --days N --json`` figures (for the MCP ``verification_stats`` tool),
    from the index beside the log."""
    window = days_window(days, resolve_zone(tz, config))
    keys = log_keys(config)
    return compute_stats(
        config.log_path, window, member=member, keys=keys, index=store_path(config),
        checkpoints=config.checkpoints_path,
    )  # fmt: skip


def with_review(
    figures: dict[str, Any],
    path: Path,
    window: Window,
    member: str | None = None,
    *,
    keys: KeyRing | None = None,
    index: Path | None = None,
) -> dict[str, Any]:
    """``figures`` with the ``review`` object: open appeals, examples of the top failing
    checks, policy versions, shadow decisions (read from the index)."""
    codes = [r["code"] for r in figures["top_rejection_reasons"] if r["code"] in figures["by_code"]]
    store = open_store(path, keys, index)
    try:
        found = review_json(
            store, window, previous_window(window), member=member, codes=codes[:EXAMPLE_CODES]
        )
    finally:
        store.close()
    return {**figures, "review": found}


__all__ = [
    "APPROVED",
    "DECISIONS",
    "FALLBACK",
    "INTERCEPTS",
    "REJECTED",
    "STATS_SCHEMA",
    "Aggregator",
    "Intercept",
    "LatencyHistogram",
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
    "stats_for",
    "ts_key",
    "week_label",
    "week_window",
    "window_from_args",
    "with_review",
    "zone_name",
]
