"""What the report shows, as tables and chart rows, shared by the Markdown and the HTML.

Everything here is built from the stats JSON (:mod:`lingyi.stats`) and is plain data: the
text in it may come from the log (member names, reasons) and is escaped by whoever renders
it, never here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lingyi.report.labels import Labels
from lingyi.stats import DECISIONS, INTERCEPTS

Stats = dict[str, Any]
INTEGRITY_KEYS = (
    "lines",
    "records",
    "unreadable",
    "invalid",
    "chain_breaks",
    "unknown_schema",
    "unhashed",
)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def num(value: float | None) -> str:
    """A latency for people: one decimal is enough (percentiles are within 0.5%)."""
    return "–" if value is None else f"{value:.1f}"


@dataclass(frozen=True)
class Row:
    """One bar of a chart: a label and one value per series."""

    label: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Table:
    head: list[str]
    rows: list[list[object]]


def decision_names(t: Labels) -> list[str]:
    return [t[d] for d in DECISIONS]


def window_line(stats: Stats, t: Labels) -> str:
    w, days = stats["window"], stats["by_day"]
    span = f"{days[0]['date']} .. {days[-1]['date']}" if days else f"{w['start']} .. {w['end']}"
    return f"{t['window']}: {span} ({w['tz']}) · {t['generated']} {stats['generated_at']}"


def top_code_rows(stats: Stats, limit: int = 10) -> list[Row]:
    """Failing codes, most failures first: (rejected, fallback, warn-only) per code."""
    codes = [(c, v) for c, v in stats["by_code"].items() if v["failed"]]
    codes.sort(key=lambda cv: (-cv[1]["failed"], cv[0]))
    return [Row(c, (v["rejected"], v["fallback"], v["approved"])) for c, v in codes[:limit]]


def member_rows(stats: Stats) -> list[Row]:
    items = stats["by_member"].items()
    return [Row(m, tuple(v[d] for d in DECISIONS)) for m, v in items if v["total"]]


def day_rows(stats: Stats, t: Labels) -> list[Row]:
    return [Row(t.day(d["date"]), tuple(d[k] for k in DECISIONS)) for d in stats["by_day"]]


def cards(stats: Stats, t: Labels) -> list[tuple[str, str]]:
    """The headline figures: (label, value)."""
    tot, app = stats["totals"], stats["appeals"]
    out = [(t["verifications"], str(tot["total"])), (t["blocked"], pct(tot["blocked_rate"]))]
    out += [(t[i.name], str(stats["intercepted"][i.name])) for i in INTERCEPTS]
    out += [(t["p95"], num(stats["latency_ms"]["p95"]))]
    return [*out, (t["fp_rate"], pct(app["false_positive_rate"]))]


def summary_table(stats: Stats, t: Labels) -> Table:
    tot, lat, app = stats["totals"], stats["latency_ms"], stats["appeals"]
    rows: list[list[object]] = [[t["verifications"], str(tot["total"]), ""]]
    rows += [[t[d], str(tot[d]), pct(tot[f"{d}_rate"])] for d in DECISIONS]
    rows += [[t["blocked"], str(tot["blocked"]), pct(tot["blocked_rate"])]]
    rows += [[t[i.name], str(stats["intercepted"][i.name]), ""] for i in INTERCEPTS]
    rows += [[f"{t['latency']} p{q}", num(lat[f"p{q}"]), ""] for q in (50, 95, 99)]
    rows += [[f"{t['appeals']}: {t[k]}", str(app[k]), ""] for k in ("filed", "open", "upheld")]
    overturned = [f"{t['appeals']}: {t['overturned']}", str(app["overturned"])]
    rows += [[*overturned, pct(app["overturn_rate"])]]
    rows += [[t["fp_rate"], "", pct(app["false_positive_rate"])]]
    return Table([t["figure"], t["count"], t["rate"]], rows)


def day_table(stats: Stats, t: Labels) -> Table:
    rows: list[list[object]] = [[r.label, *r.values, sum(r.values)] for r in day_rows(stats, t)]
    return Table([t["day"], *decision_names(t), t["total"]], rows)


def code_table(stats: Stats, t: Labels) -> Table:
    """The failing checks, most failures first, with their appeals."""
    head = [t["code"], t["failed"], t["rejected"], t["fallback"], t["warn"]]
    head += [t["overturned"], t["fp_rate"]]
    rows: list[list[object]] = []
    for row in top_code_rows(stats):
        appeals = stats["by_code"][row.label]["appeals"]
        fp = pct(appeals["false_positive_rate"])
        rows.append([row.label, sum(row.values), *row.values, appeals["overturned"], fp])
    return Table(head, rows)


def reason_table(stats: Stats, t: Labels) -> Table:
    rows: list[list[object]] = [
        [r["code"], r["count"], r["example"]] for r in stats["top_rejection_reasons"]
    ]
    return Table([t["code"], t["count"], t["example"]], rows)


def member_table(stats: Stats, t: Labels) -> Table:
    head = [t["member"], t["total"], *decision_names(t), t["blocked"], t["p95"]]
    head += [t["appeals"], t["overturned"], t["fp_rate"]]
    rows: list[list[object]] = []
    for name, m in stats["by_member"].items():
        a = m["appeals"]
        rows.append([name, m["total"], m["approved"], m["rejected"], m["fallback"],
                     pct(m["blocked_rate"]), num(m["latency_ms"]["p95"]), a["filed"],
                     a["overturned"], pct(a["false_positive_rate"])])  # fmt: skip
    return Table(head, rows)


def type_table(stats: Stats, t: Labels) -> Table:
    """Decisions per kind of input: facts, actions, communications, answers, tasks, …"""
    head = [t["input_type"], t["total"], *decision_names(t), t["blocked"]]
    rows: list[list[object]] = [
        [name, v["total"], v["approved"], v["rejected"], v["fallback"], pct(v["blocked_rate"])]
        for name, v in stats.get("by_type", {}).items()
        if v["total"]
    ]
    return Table(head, rows)


def integrity_table(stats: Stats, t: Labels) -> Table:
    i = stats["integrity"]
    return Table(["", t["count"]], [[k, i[k]] for k in INTEGRITY_KEYS])


def integrity_examples(stats: Stats, t: Labels) -> Table:
    rows: list[list[object]] = [
        [e["line"], e["id"] or "", e["problem"]] for e in stats["integrity"]["examples"]
    ]
    return Table([t["line"], t["record"], t["problem"]], rows)
