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


def signed(value: float | None, *, rate: bool = False) -> str:
    """A change for people: ``+3``, ``−2``, ``0``; a rate change in percentage points."""
    if value is None:
        return "–"
    if rate:
        value = round(value * 100, 1)
        return "0 pp" if value == 0 else f"{value:+.1f} pp".replace("-", "−")
    shown = f"{value:+g}" if value else "0"
    return shown.replace("-", "−")


def fp_cell(appeals: dict[str, Any], t: Labels) -> str:
    """The measured false-positive rate with its count, or no data below the minimum."""
    resolved = appeals.get("resolved_blocks", 0)
    if appeals.get("measured_fp_rate") is None:
        return t.fmt("fp_no_data", count=resolved, min=appeals.get("measured_fp_min", 0))
    return t.fmt("fp_value", rate=pct(appeals["measured_fp_rate"]),
                 overturned=appeals["overturned"], resolved=resolved)  # fmt: skip


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
    unknown = stats.get("unknown_members", {})
    items = [(m, v) for m, v in stats["by_member"].items() if m not in unknown]
    return [Row(m, tuple(v[d] for d in DECISIONS)) for m, v in items if v["total"]]


def day_rows(stats: Stats, t: Labels) -> list[Row]:
    return [Row(t.day(d["date"]), tuple(d[k] for k in DECISIONS)) for d in stats["by_day"]]


def _at(figures: Stats, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in nested figures, or None."""
    value: Any = figures
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def change_cell(stats: Stats, path: tuple[str, ...], rate: tuple[str, ...] | None = None) -> str:
    """The change of a figure since the period before (and of its rate, in points)."""
    change = stats.get("change", {})
    count = _at(change, path)
    shown = "–" if count is None else signed(round(count, 1))
    if count is not None and path[0] == "latency_ms":
        shown = f"{count:+.1f}".replace("-", "−")
    if rate is not None:
        shown += " · " + signed(_at(change, rate), rate=True)
    return shown


def cards(stats: Stats, t: Labels) -> list[tuple[str, str, str]]:
    """The headline figures: (label, value, change since the week before)."""
    tot, app, open_now = stats["totals"], stats["appeals"], _open_now(stats)
    out = [(t["verifications"], str(tot["total"]), change_cell(stats, ("totals", "total")))]
    out += [
        (t["blocked"], pct(tot["blocked_rate"]), _rate_change(stats, ("totals", "blocked_rate")))
    ]
    out += [(t[i.name], str(stats["intercepted"][i.name]),
             change_cell(stats, ("intercepted", i.name))) for i in INTERCEPTS]  # fmt: skip
    out += [(t["p95"], num(stats["latency_ms"]["p95"]), change_cell(stats, ("latency_ms", "p95")))]
    out += [(t["to_decide"], str(open_now), "")]
    return [*out, (t["fp_card"], *_fp_card(app, t))]


def _open_now(stats: Stats) -> int:
    review = stats.get("review")
    return (
        int(review["open_appeals_total"]) if isinstance(review, dict) else stats["appeals"]["open"]
    )


def _fp_card(appeals: dict[str, Any], t: Labels) -> tuple[str, str]:
    """The measured rate as the card's value, its count beside it (or why there is none)."""
    if appeals.get("measured_fp_rate") is None:
        return "–", fp_cell(appeals, t)
    count = t.fmt("fp_count", overturned=appeals["overturned"], resolved=appeals["resolved_blocks"])
    return pct(appeals["measured_fp_rate"]), count


def _rate_change(stats: Stats, path: tuple[str, ...]) -> str:
    return signed(_at(stats.get("change", {}), path), rate=True)


def _trend_row(
    stats: Stats, label: str, path: tuple[str, ...], rate: tuple[str, ...] | None = None
) -> list[object]:
    """label, this week, its rate, the week before, its rate, the change."""
    previous = stats.get("previous", {})
    fmt = num if path[0] == "latency_ms" else (lambda v: "–" if v is None else str(v))
    rates = (pct(_at(stats, rate)), pct(_at(previous, rate))) if rate else ("", "")
    return [label, fmt(_at(stats, path)), rates[0], fmt(_at(previous, path)), rates[1],
            change_cell(stats, path, rate)]  # fmt: skip


def summary_table(stats: Stats, t: Labels) -> Table:
    rows = [_trend_row(stats, t["verifications"], ("totals", "total"))]
    rows += [_trend_row(stats, t[d], ("totals", d), ("totals", f"{d}_rate")) for d in DECISIONS]
    rows += [_trend_row(stats, t["blocked"], ("totals", "blocked"), ("totals", "blocked_rate"))]
    rows += [_trend_row(stats, t[i.name], ("intercepted", i.name)) for i in INTERCEPTS]
    rows += [
        _trend_row(stats, f"{t['latency']} p{q}", ("latency_ms", f"p{q}")) for q in (50, 95, 99)
    ]
    rows += [_trend_row(stats, f"{t['appeals']}: {t[k]}", ("appeals", k))
             for k in ("filed", "open", "upheld", "overturned")]  # fmt: skip
    rows += [_trend_row(stats, t["fp_rate"], ("appeals", "overturned"),
                        ("appeals", "false_positive_rate"))]  # fmt: skip
    label = t.fmt("previous", label=_at(stats, ("previous", "window", "label")) or "–")
    head = [t["figure"], t["this_week"], t["rate"], label, t["rate"], t["change"]]
    return Table(head, rows)


def day_table(stats: Stats, t: Labels) -> Table:
    rows: list[list[object]] = [[r.label, *r.values, sum(r.values)] for r in day_rows(stats, t)]
    return Table([t["day"], *decision_names(t), t["total"]], rows)


def code_table(stats: Stats, t: Labels) -> Table:
    """The failing checks, most failures first, with their appeals."""
    head = [t["code"], t["failed"], t["rejected"], t["fallback"], t["warn"]]
    head += [t["previous_short"], t["change"]]
    rows: list[list[object]] = []
    for row in top_code_rows(stats):
        was = _at(stats, ("previous", "by_code", row.label, "failed")) or 0
        change = change_cell(stats, ("by_code", row.label, "failed"))
        rows.append([row.label, sum(row.values), *row.values, was, change])
    return Table(head, rows)


def member_table(stats: Stats, t: Labels) -> Table:
    head = [t["member"], t["total"], *decision_names(t), t["blocked_short"], t["p95"]]
    head += [t["appeals"], t["overturned"], t["previous_blocked"], t["change"]]
    rows: list[list[object]] = []
    unknown = stats.get("unknown_members", {})
    for name, m in stats["by_member"].items():
        if name in unknown:
            continue  # shown apart, as a security signal
        a, before = m["appeals"], _at(stats, ("previous", "by_member", name, "blocked_rate"))
        rows.append([name, m["total"], m["approved"], m["rejected"], m["fallback"],
                     pct(m["blocked_rate"]), num(m["latency_ms"]["p95"]), a["filed"],
                     a["overturned"], pct(before),
                     _rate_change(stats, ("by_member", name, "blocked_rate"))])  # fmt: skip
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
