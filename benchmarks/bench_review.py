"""What the weekly review costs over a big log, against the stats it is added to.

Uses the realistic log of ``bench_store.py`` (``--records`` records over 90 days, built once
under ``benchmarks/.cache/``) and times, interleaved round by round in this process:

* ``stats``: the stats of the last ISO week from the index, up to date (``lingyi stats``,
  with the week before) — the baseline;
* ``review``: the review pass (:func:`lingyi.stats.review_json`): open appeals, examples,
  policy versions, shadow; one streaming pass that parses only the two weeks' lines;
* ``report``: the whole weekly report, stats + review + Markdown + HTML;
* ``full``: the same week with ``--full`` (two windowed passes: the week and the week before).

    .venv/bin/python benchmarks/bench_review.py --records 200000 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench_store import CACHE, build_log
from lingyi.report import render_html, render_markdown
from lingyi.stats import (
    compute_stats,
    previous_window,
    resolve_zone,
    week_window,
    with_review,
)
from lingyi.stats.review import review_json
from lingyi.store import open_store


def _log(records: int) -> Path:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"review-{records}.jsonl"
    if not path.exists():
        print(f"building {path} (once) ...", file=sys.stderr)
        build_log(path, records)
    return path


def _last_week(path: Path) -> Any:
    import json

    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 8192))
        last = json.loads(handle.read().splitlines()[-1])
    moment = datetime.fromisoformat(last["ts"].replace("Z", "+00:00"))
    year, week, _ = moment.isocalendar()
    return previous_window(week_window(f"{year}-W{week:02d}", resolve_zone("UTC")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    path = _log(args.records)
    window = _last_week(path)
    compute_stats(path, window)  # the index, built once

    def report() -> None:
        stats = with_review(compute_stats(path, window), path, window)
        render_markdown(stats, "zh"), render_html(stats, "zh")

    def review() -> None:
        store = open_store(path)
        review_json(store, window, previous_window(window))
        store.close()

    scenarios: dict[str, Callable[[], object]] = {
        "stats": lambda: compute_stats(path, window),
        "review": review,
        "report": report,
        "full": lambda: compute_stats(path, window, rebuild=True),
    }
    times: dict[str, list[float]] = {name: [] for name in scenarios}
    names = list(scenarios)
    for i in range(args.runs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            scenarios[name]()
            times[name].append(time.perf_counter() - started)
    size = path.stat().st_size / 1e6
    print(f"log: {args.records} records, {size:.0f} MB; week {window.label}; {args.runs} runs")
    print(f"{'scenario':>8} {'median s':>9} {'max s':>8} {'vs stats':>9}")
    base = statistics.median(times["stats"])
    for name, walls in times.items():
        median = statistics.median(walls)
        print(f"{name:>8} {median:>9.3f} {max(walls):>8.3f} {median / base:>8.1f}×")


if __name__ == "__main__":
    main()
