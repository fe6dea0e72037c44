"""The weekly report as one self-contained HTML page, from a Jinja2 template.

The page has no scripts and no external assets, so it can be mailed or archived as one file.
Autoescaping is on for the whole template: the log's text (member names, reasons, codes)
is untrusted and reaches the page only as escaped text.
"""

from __future__ import annotations

import re
from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from lingyi.report import charts
from lingyi.report import figures as f
from lingyi.report import review as r
from lingyi.report.judge import criteria_table, judge_figures, judge_table
from lingyi.report.labels import Labels

_NUMERIC = re.compile(r"^[+−-]?\d[\d.]*%?( pp)?( · [+−-]?\d[\d.]*( pp)?)?$|^[–0]$|^0 pp$")


def _numeric(value: object) -> bool:
    """Right-align counts, rates, latencies and changes (``12``, ``50.0%``, ``+3 · −2.0 pp``)."""
    if isinstance(value, int | float):
        return True
    return bool(_NUMERIC.match(str(value)))


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("lingyi.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a misspelt name in the template fails, not renders ""
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["numeric"] = _numeric
    return env


def _charts(stats: f.Stats, t: Labels) -> dict[str, Markup]:
    decisions = [charts.COLOURS[d] for d in ("approved", "rejected", "fallback")]
    names = f.decision_names(t)
    per_day = charts.Chart(names, decisions, t["per_day"])
    codes = charts.Chart(
        [t["rejected"], t["fallback"], t["warn"]],
        [charts.COLOURS["rejected"], charts.COLOURS["fallback"], charts.WARN_COLOUR],
        t["top_codes"],
    )
    per_member = charts.Chart(names, decisions, t["per_member"])
    return {
        "day_chart": charts.column_chart(
            f.day_rows(stats, t), per_day, (t["axis_count"], t["axis_day"])
        ),
        "code_chart": charts.bar_chart(f.top_code_rows(stats), codes, t["failed"]),
        "member_chart": charts.bar_chart(f.member_rows(stats), per_member, t["axis_count"]),
    }


def _judge(stats: f.Stats, t: Labels) -> dict[str, object]:
    judge = judge_figures(stats)
    if judge is None:
        return {"judge": None, "judge_criteria": None}
    before = stats.get("previous", {}).get("judge")
    return {"judge": judge_table(judge, t, before), "judge_criteria": criteria_table(judge, t)}


def _review(stats: f.Stats, t: Labels) -> dict[str, object]:
    """The parts a reviewer acts on (lingyi.report.review)."""
    return {
        "records_line": r.records_line(stats, t),
        "changes": r.change_lines(stats, t),
        "appeals": r.appeals_table(stats, t),
        "appeals_more": r.appeals_more(stats, t),
        "fp_note": t.fmt("fp_note", min=stats["appeals"].get("measured_fp_min", 0)),
        "fp": r.fp_table(stats, t),
        "unknown": r.unknown_table(stats, t),
        "examples": r.example_tables(stats, t),
        "drill": r.drill_tables(stats, t),
        "versions": r.versions_table(stats, t),
        "versions_before": r.versions_before(stats, t),
        "check_changes": r.check_changes(stats, t),
        "shadow": r.shadow_table(stats, t),
    }


def render_html(stats: f.Stats, lang: str) -> str:
    t = Labels(lang)
    page = (
        environment()
        .get_template("report.html.j2")
        .render(
            labels=t,
            font=Markup(charts.FONT),  # a constant of ours, with quotes that must stay quotes
            title=f"{t['title']} — {stats['window']['label']}",
            window_line=f.window_line(stats, t),
            cards=f.cards(stats, t),
            summary=f.summary_table(stats, t),
            days=f.day_table(stats, t),
            codes=f.code_table(stats, t),
            members=f.member_table(stats, t),
            types=f.type_table(stats, t),
            integrity_ok=stats["integrity"]["ok"],
            integrity=f.integrity_table(stats, t),
            examples_integrity=f.integrity_examples(stats, t),
            **_review(stats, t),
            **_judge(stats, t),
            **_charts(stats, t),
        )
    )
    return page + "\n"
