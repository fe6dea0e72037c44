"""The judge's section of the weekly report: what it was asked, what it cost, what it said.

Built from the ``judge`` object of the stats JSON (:mod:`lingyi.stats.judge`); a stats object
without one (an older caller) shows the section as not consulted.
"""

from __future__ import annotations

from typing import Any

from lingyi.report.figures import Stats, Table, pct
from lingyi.report.labels import Labels

TOP_CRITERIA = 10


def judge_figures(stats: Stats) -> dict[str, Any] | None:
    """The judge object when the judge was consulted in the window, else None."""
    judge = stats.get("judge")
    return judge if isinstance(judge, dict) and judge.get("consulted") else None


def judge_table(judge: dict[str, Any], t: Labels) -> Table:
    """Consultations, calls, cache hits, spend, tokens, then each outcome that occurred."""
    rows: list[list[object]] = [
        [t["judge_consulted"], judge["consulted"], ""],
        [t["judge_calls"], judge["calls"], ""],
        [t["judge_cache_hits"], judge["cache_hits"], pct(judge["cache_hit_rate"])],
        [t["judge_spend"], f"{judge['spend_usd']:.4f}", ""],
        [t["judge_tokens"], f"{judge['input_tokens']} / {judge['output_tokens']}", ""],
    ]
    consulted = judge["consulted"]
    rows += [
        [f"{t['judge_outcome']}: {name}", n, pct(n / consulted)]
        for name, n in judge["outcomes"].items()
        if n
    ]
    return Table([t["figure"], t["count"], t["rate"]], rows)


def criteria_table(judge: dict[str, Any], t: Labels) -> Table:
    """The rubric criteria the judge failed most often."""
    rows: list[list[object]] = [
        [c["criterion"], c["passed"], c["failed"], pct(c["fail_rate"])]
        for c in judge["criteria"][:TOP_CRITERIA]
    ]
    return Table([t["judge_criterion"], t["judge_passed"], t["failed"], t["rate"]], rows)
