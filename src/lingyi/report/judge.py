"""The judge's section of the weekly report: what it was asked, what it cost, what it said.

Built from the ``judge`` object of the stats JSON (:mod:`lingyi.stats.judge`); a stats object
without one (an older caller) shows the section as not consulted.
"""

from __future__ import annotations

from typing import Any

from lingyi.report.figures import Stats, Table, pct, signed
from lingyi.report.labels import Labels

TOP_CRITERIA = 10


def judge_figures(stats: Stats) -> dict[str, Any] | None:
    """The judge object when the judge was consulted in the window or the one before."""
    judge = stats.get("judge")
    before = stats.get("previous", {}).get("judge", {})
    if not isinstance(judge, dict):
        return None
    return judge if judge.get("consulted") or before.get("consulted") else None


def judge_table(judge: dict[str, Any], t: Labels, before: dict[str, Any] | None = None) -> Table:
    """Consultations, calls, cache hits, spend, tokens, then each outcome that occurred, with
    the week before beside them."""
    was = before or {}
    rows: list[list[object]] = [
        _row(t["judge_consulted"], judge, was, "consulted"),
        _row(t["judge_calls"], judge, was, "calls"),
        [*_row(t["judge_cache_hits"], judge, was, "cache_hits"), pct(judge["cache_hit_rate"])],
        _row(t["judge_spend"], judge, was, "spend_usd"),
        [t["judge_tokens"], f"{judge['input_tokens']} / {judge['output_tokens']}",
         f"{was.get('input_tokens', 0)} / {was.get('output_tokens', 0)}", ""],
    ]  # fmt: skip
    consulted = judge["consulted"]
    outcomes = was.get("outcomes", {})
    rows += [
        [f"{t['judge_outcome']}: {name}", n, outcomes.get(name, 0),
         signed(n - outcomes.get(name, 0)), pct(n / consulted) if consulted else "–"]
        for name, n in judge["outcomes"].items()
        if n or outcomes.get(name)
    ]  # fmt: skip
    head = [t["figure"], t["this_week"], t["previous_short"], t["change"], t["rate"]]
    return Table(head, [row + [""] * (len(head) - len(row)) for row in rows])


def _row(label: str, judge: dict[str, Any], was: dict[str, Any], key: str) -> list[object]:
    now, before = judge[key], was.get(key, 0)
    if key == "spend_usd":
        return [label, f"{now:.4f}", f"{before:.4f}", f"{now - before:+.4f}"]
    return [label, now, before, signed(now - before)]


def criteria_table(judge: dict[str, Any], t: Labels) -> Table:
    """The rubric criteria the judge failed most often."""
    rows: list[list[object]] = [
        [c["criterion"], c["passed"], c["failed"], pct(c["fail_rate"])]
        for c in judge["criteria"][:TOP_CRITERIA]
    ]
    return Table([t["judge_criterion"], t["judge_passed"], t["failed"], t["rate"]], rows)
