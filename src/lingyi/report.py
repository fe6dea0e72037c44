"""The weekly report: Markdown and a self-contained HTML page with SVG charts.

Both are rendered from the stats JSON (:mod:`lingyi.stats`) of one ISO week in the
configured zone, so the report and ``lingyi stats --json`` never disagree. The HTML page
has no scripts and no external assets (inline CSS, inline SVG) so it can be mailed or
archived as one file; colours come from the Okabe–Ito palette (safe for colour-blind
readers) and every chart is repeated as a table, so colour is never the only channel.
Everything that comes from the log is escaped: member names and reasons are untrusted.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from lingyi.config import Config
from lingyi.stats import DECISIONS, INTERCEPTS, compute_stats, resolve_zone, week_window

COLOURS = {"approved": "#009E73", "rejected": "#D55E00", "fallback": "#0072B2"}
FONT = (
    "'Noto Sans CJK SC','Source Han Sans SC','PingFang SC','Microsoft YaHei',"
    "'Helvetica Neue',Arial,sans-serif"
)

# Report text in the two languages the config allows; keys are stable, text is not.
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "title": "LingYi Guard weekly report",
        "window": "Window",
        "generated": "generated",
        "summary": "Summary",
        "verifications": "Verifications",
        "approved": "Approved",
        "rejected": "Rejected",
        "fallback": "Fallback",
        "blocked": "Blocked (rejected + fallback)",
        "figure": "Figure",
        "count": "Count",
        "rate": "Rate",
        "intercepted": "Problems intercepted",
        "fabricated_communications": "Fabricated communications",
        "boundary_violations": "Boundary violations",
        "unlabelled_inferences": "Unlabelled inferences",
        "latency": "Latency (ms)",
        "appeals": "Appeals",
        "filed": "Filed",
        "open": "Open",
        "upheld": "Upheld",
        "overturned": "Overturned",
        "fp_rate": "Measured false-positive rate (overturned / blocked)",
        "per_day": "Decisions per day",
        "day": "Day",
        "top_codes": "Top failing checks",
        "code": "Check code",
        "failed": "Failed",
        "warn": "Warn only",
        "reasons": "Top rejection reasons",
        "example": "Example",
        "per_member": "Per member",
        "member": "Member",
        "total": "Total",
        "integrity": "Log integrity",
        "integrity_ok": "The hash chain is intact and every line was readable.",
        "integrity_bad": "Some records are damaged; figures include what could be read.",
        "none": "Nothing in this week.",
        "axis_count": "verifications",
        "axis_day": "day (local time)",
    },
    "zh": {
        "title": "灵依守卫 周报",
        "window": "时间范围",
        "generated": "生成于",
        "summary": "概览",
        "verifications": "校验总数",
        "approved": "通过",
        "rejected": "拒绝",
        "fallback": "降级",
        "blocked": "拦截（拒绝 + 降级）",
        "figure": "指标",
        "count": "数量",
        "rate": "比例",
        "intercepted": "拦截的问题",
        "fabricated_communications": "虚构的沟通",
        "boundary_violations": "越界行为",
        "unlabelled_inferences": "未标注的推演",
        "latency": "延迟（毫秒）",
        "appeals": "申诉",
        "filed": "提出",
        "open": "待处理",
        "upheld": "维持",
        "overturned": "推翻",
        "fp_rate": "实测误报率（推翻 / 拦截）",
        "per_day": "每日裁决",
        "day": "日期",
        "top_codes": "失败最多的检查",
        "code": "检查代码",
        "failed": "失败",
        "warn": "仅警告",
        "reasons": "主要拒绝原因",
        "example": "示例",
        "per_member": "按成员",
        "member": "成员",
        "total": "合计",
        "integrity": "日志完整性",
        "integrity_ok": "哈希链完整，所有行均可读取。",
        "integrity_bad": "部分记录已损坏；统计包含可读取的部分。",
        "none": "本周没有记录。",
        "axis_count": "校验数",
        "axis_day": "日期（本地时间）",
    },
}
WEEKDAYS = {"en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), "zh": tuple("一二三四五六日")}


def labels(lang: str) -> dict[str, str]:
    return LABELS.get(lang, LABELS["en"])


def day_label(iso: str, lang: str) -> str:
    day = date.fromisoformat(iso)
    name = WEEKDAYS.get(lang, WEEKDAYS["en"])[day.weekday()]
    return f"周{name} {day:%m-%d}" if lang == "zh" else f"{name} {day:%m-%d}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def num(value: float | None) -> str:
    """A latency for people: one decimal is enough (percentiles are within 0.5%)."""
    return "–" if value is None else f"{value:.1f}"


# --------------------------------------------------------------------------- data


def weekly_stats(config: Config, week: str | None = None, tz: str | None = None) -> dict[str, Any]:
    """The stats JSON of one ISO week (default: the last full week) in the zone."""
    window = week_window(week, resolve_zone(tz, config))
    return compute_stats(config.log_path, window)


def weekly_report_markdown(config: Config, week: str | None = None, tz: str | None = None) -> str:
    """The weekly report as Markdown (for the MCP weekly report resource)."""
    return render_markdown(weekly_stats(config, week, tz), config.language)


def write_report(
    config: Config,
    out_dir: Path,
    *,
    week: str | None = None,
    tz: str | None = None,
    formats: Sequence[str] = ("md", "html"),
) -> list[Path]:
    """Write ``lingyi-report-<week>.md`` / ``.html`` into ``out_dir``; return the paths."""
    stats = weekly_stats(config, week, tz)
    out_dir.mkdir(parents=True, exist_ok=True)
    renderers = {"md": render_markdown, "html": render_html}
    written = []
    for fmt in formats:
        path = out_dir / f"lingyi-report-{stats['window']['label']}.{fmt}"
        path.write_text(renderers[fmt](stats, config.language), encoding="utf-8")
        written.append(path)
    return written


@dataclass(frozen=True)
class Row:
    """One bar of a chart: a label and one value per series."""

    label: str
    values: tuple[int, ...]


def top_code_rows(stats: dict[str, Any], limit: int = 10) -> list[Row]:
    """Failing codes, most failures first: (rejected, fallback, warn-only) per code."""
    codes = [(c, v) for c, v in stats["by_code"].items() if v["failed"]]
    codes.sort(key=lambda cv: (-cv[1]["failed"], cv[0]))
    return [Row(c, (v["rejected"], v["fallback"], v["approved"])) for c, v in codes[:limit]]


def member_rows(stats: dict[str, Any]) -> list[Row]:
    items = stats["by_member"].items()
    return [Row(m, tuple(v[d] for d in DECISIONS)) for m, v in items if v["total"]]


def day_rows(stats: dict[str, Any], lang: str) -> list[Row]:
    return [
        Row(day_label(d["date"], lang), tuple(d[k] for k in DECISIONS)) for d in stats["by_day"]
    ]


# --------------------------------------------------------------------------- markdown


def _md_cell(value: object) -> str:
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def md_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |"]
    lines.append("|" + "|".join("---" for _ in head) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(stats: dict[str, Any], lang: str = "en") -> str:
    t = labels(lang)
    parts = [f"# {t['title']} — {stats['window']['label']}", _window_line(stats, t)]
    for title, body in _sections(stats, lang):
        parts += [f"## {title}", body]
    return "\n\n".join(parts) + "\n"


def _window_line(stats: dict[str, Any], t: dict[str, str]) -> str:
    w = stats["window"]
    days = stats["by_day"]
    span = f"{days[0]['date']} .. {days[-1]['date']}" if days else f"{w['start']} .. {w['end']}"
    return f"{t['window']}: {span} ({w['tz']}) · {t['generated']} {stats['generated_at']}"


def _sections(stats: dict[str, Any], lang: str) -> list[tuple[str, str]]:
    t = labels(lang)
    return [
        (t["summary"], summary_markdown(stats, t)),
        (
            t["per_day"],
            md_table([t["day"], *_decision_names(t), t["total"]], _table(day_rows(stats, lang))),
        ),
        (t["top_codes"], _codes_markdown(stats, t)),
        (t["reasons"], _reasons_markdown(stats, t)),
        (t["per_member"], _members_markdown(stats, t)),
        (t["integrity"], integrity_markdown(stats, t)),
    ]


def _decision_names(t: dict[str, str]) -> list[str]:
    return [t[d] for d in DECISIONS]


def _table(rows: list[Row]) -> list[list[object]]:
    return [[r.label, *r.values, sum(r.values)] for r in rows]


def summary_rows(stats: dict[str, Any], t: dict[str, str]) -> list[list[str]]:
    tot, lat, app = stats["totals"], stats["latency_ms"], stats["appeals"]
    rows = [[t["verifications"], str(tot["total"]), ""]]
    rows += [[t[d], str(tot[d]), pct(tot[f"{d}_rate"])] for d in DECISIONS]
    rows += [[t["blocked"], str(tot["blocked"]), pct(tot["blocked_rate"])]]
    rows += [[t[i.name], str(stats["intercepted"][i.name]), ""] for i in INTERCEPTS]
    rows += [[f"{t['latency']} p{q}", num(lat[f"p{q}"]), ""] for q in (50, 95, 99)]
    rows += [[f"{t['appeals']}: {t[k]}", str(app[k]), ""] for k in ("filed", "open", "upheld")]
    rows += [
        [f"{t['appeals']}: {t['overturned']}", str(app["overturned"]), pct(app["overturn_rate"])]
    ]
    rows += [[t["fp_rate"], "", pct(app["false_positive_rate"])]]
    return rows


def summary_markdown(stats: dict[str, Any], t: dict[str, str]) -> str:
    return md_table([t["figure"], t["count"], t["rate"]], summary_rows(stats, t))


def code_table(stats: dict[str, Any], t: dict[str, str]) -> tuple[list[str], list[list[object]]]:
    """Head and rows of the failing-checks table (shared by Markdown and HTML)."""
    head = [t["code"], t["failed"], t["rejected"], t["fallback"], t["warn"]]
    head += [t["overturned"], t["fp_rate"]]
    rows: list[list[object]] = []
    for row in top_code_rows(stats):
        appeals = stats["by_code"][row.label]["appeals"]
        fp = pct(appeals["false_positive_rate"])
        rows.append([row.label, sum(row.values), *row.values, appeals["overturned"], fp])
    return head, rows


def _codes_markdown(stats: dict[str, Any], t: dict[str, str]) -> str:
    head, rows = code_table(stats, t)
    return md_table(head, rows) if rows else t["none"]


def _reasons_markdown(stats: dict[str, Any], t: dict[str, str]) -> str:
    rows = [[r["code"], r["count"], r["example"]] for r in stats["top_rejection_reasons"]]
    return md_table([t["code"], t["count"], t["example"]], rows) if rows else t["none"]


def member_table_rows(stats: dict[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    for name, m in stats["by_member"].items():
        a = m["appeals"]
        rows.append([name, m["total"], m["approved"], m["rejected"], m["fallback"],
                     pct(m["blocked_rate"]), num(m["latency_ms"]["p95"]), a["filed"],
                     a["overturned"], pct(a["false_positive_rate"])])  # fmt: skip
    return rows


def member_head(t: dict[str, str]) -> list[str]:
    return [t["member"], t["total"], *_decision_names(t), t["blocked"], "p95 ms",
            t["appeals"], t["overturned"], t["fp_rate"]]  # fmt: skip


def _members_markdown(stats: dict[str, Any], t: dict[str, str]) -> str:
    rows = member_table_rows(stats)
    return md_table(member_head(t), rows) if rows else t["none"]


def integrity_rows(stats: dict[str, Any]) -> list[list[object]]:
    i = stats["integrity"]
    keys = (
        "lines",
        "records",
        "unreadable",
        "invalid",
        "chain_breaks",
        "unknown_schema",
        "unhashed",
    )
    return [[k, i[k]] for k in keys]


def integrity_markdown(stats: dict[str, Any], t: dict[str, str]) -> str:
    i = stats["integrity"]
    if i["ok"]:
        return t["integrity_ok"]
    examples = [f"- line {e['line']} ({e['id']}): {e['problem']}" for e in i["examples"]]
    table = md_table(["", t["count"]], integrity_rows(stats))
    return "\n\n".join([t["integrity_bad"], table, "\n".join(examples)])


# --------------------------------------------------------------------------- SVG charts


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def el(tag: str, text: str | None = None, **attrs: object) -> str:
    """An SVG/HTML element; ``class_`` → class, ``text_anchor`` → text-anchor.

    ``text`` is inserted as is (callers escape it); attribute values are escaped here.
    """
    parts = []
    for key, value in attrs.items():
        shown = f"{value:.1f}" if isinstance(value, float) else value
        parts.append(f' {key.rstrip("_").replace("_", "-")}="{_esc(shown)}"')
    attr = "".join(parts)
    return f"<{tag}{attr}/>" if text is None else f"<{tag}{attr}>{text}</{tag}>"


def nice_ceiling(value: int) -> tuple[int, int]:
    """An axis maximum >= value and a tick step from the 1-2-5 series (at most ~5 ticks)."""
    if value <= 0:
        return 1, 1
    step, factors = 1, itertools.cycle((2, 2.5, 2))  # 1, 2, 5, 10, 20, 50, …
    while step * 5 < value:
        step = round(step * next(factors))
    return -(-value // step) * step, step


@dataclass(frozen=True)
class Chart:
    """What every chart needs: series names and colours (in stacking order), a title."""

    series: Sequence[str]
    colours: Sequence[str]
    title: str

    def segments(self, row: Row) -> list[tuple[str, int, str]]:
        items = zip(self.series, row.values, self.colours, strict=True)
        return [(name, value, colour) for name, value, colour in items if value]

    def legend(self, x: int, y: int) -> str:
        parts = []
        for i, (name, colour) in enumerate(zip(self.series, self.colours, strict=True)):
            left = x + i * 150
            parts.append(el("rect", x=left, y=y - 12, width=14, height=14, fill=colour))
            parts.append(el("text", _esc(name), x=left + 20, y=y, class_="legend"))
        return "".join(parts)


def _segment(chart: Chart, row: Row, name: str, value: int, box: dict[str, float]) -> str:
    tip = el("title", _esc(f"{row.label} · {name}: {value}"))
    return el("rect", tip, **box, fill=chart.colours[list(chart.series).index(name)])


def _svg(width: int, height: int, title: str, body: str) -> str:
    return el(
        "svg",
        el("title", _esc(title)) + body,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        role="img",
        aria_label=title,
    )


def column_chart(rows: list[Row], chart: Chart, axes: tuple[str, str]) -> str:
    """Vertical stacked columns (one per row): y ticks, axis titles, totals, legend."""
    width, height, left, top, bottom = 760, 380, 70, 56, 72
    plot_w, plot_h = width - left - 20, height - top - bottom
    peak, step = nice_ceiling(max((sum(r.values) for r in rows), default=0))
    body = [_y_grid(peak, step, left, top, plot_w, plot_h), chart.legend(left, 24)]
    slot = plot_w / max(len(rows), 1)
    for i, row in enumerate(rows):
        x = left + i * slot + slot * 0.18
        body.append(_column(chart, row, x, slot * 0.64, top + plot_h, plot_h / peak))
    body.append(_axis_titles(axes, (left, top, plot_w, plot_h), height))
    return _svg(width, height, chart.title, "".join(body))


def _y_grid(peak: int, step: int, left: int, top: int, plot_w: float, plot_h: int) -> str:
    parts = []
    for value in range(0, peak + 1, step):
        y = top + plot_h - plot_h * value / peak
        parts.append(el("line", x1=left, x2=left + plot_w, y1=y, y2=y, class_="grid"))
        parts.append(el("text", str(value), x=left - 8, y=y + 4, class_="tick", text_anchor="end"))
    return "".join(parts)


def _column(chart: Chart, row: Row, x: float, w: float, base: float, scale: float) -> str:
    parts, y = [], base
    for name, value, _ in chart.segments(row):
        y -= value * scale
        box = {"x": x, "y": y, "width": w, "height": value * scale}
        parts.append(_segment(chart, row, name, value, box))
    centre = x + w / 2
    total = str(sum(row.values))
    parts.append(el("text", total, x=centre, y=y - 6, class_="value", text_anchor="middle"))
    label = _esc(row.label)
    parts.append(el("text", label, x=centre, y=base + 22, class_="tick", text_anchor="middle"))
    return "".join(parts)


def _axis_titles(axes: tuple[str, str], plot: tuple[int, int, float, int], height: int) -> str:
    left, top, plot_w, plot_h = plot
    y_mid, x_mid = top + plot_h / 2, left + plot_w / 2
    x_title = el("text", _esc(axes[1]), x=x_mid, y=height - 14, class_="axis", text_anchor="middle")
    turn = f"rotate(-90 18 {y_mid:.1f})"
    y_title = el(
        "text", _esc(axes[0]), x=18, y=y_mid, class_="axis", text_anchor="middle", transform=turn
    )
    return x_title + y_title


def bar_chart(rows: list[Row], chart: Chart, axis: str) -> str:
    """Horizontal stacked bars (one per row), so long labels such as check codes fit."""
    width, left, top, bar, gap = 760, 240, 48, 26, 10
    height = top + len(rows) * (bar + gap) + 56
    plot_w, bottom = width - left - 60, height - 52
    peak, step = nice_ceiling(max((sum(r.values) for r in rows), default=0))
    body = [_x_grid(peak, step, (left, top, plot_w), bottom), chart.legend(left, 24)]
    for i, row in enumerate(rows):
        body.append(_bar(chart, row, left, top + i * (bar + gap) + gap // 2, bar, plot_w / peak))
    mid = left + plot_w / 2
    body.append(el("text", _esc(axis), x=mid, y=height - 12, class_="axis", text_anchor="middle"))
    return _svg(width, height, chart.title, "".join(body))


def _x_grid(peak: int, step: int, plot: tuple[int, int, float], bottom: int) -> str:
    left, top, plot_w = plot
    parts = []
    for value in range(0, peak + 1, step):
        x = left + plot_w * value / peak
        parts.append(el("line", x1=x, x2=x, y1=top, y2=bottom, class_="grid"))
        parts.append(
            el("text", str(value), x=x, y=bottom + 18, class_="tick", text_anchor="middle")
        )
    return "".join(parts)


def _bar(chart: Chart, row: Row, left: int, y: int, h: int, scale: float) -> str:
    parts, x = [], float(left)
    for name, value, _ in chart.segments(row):
        box = {"x": x, "y": float(y), "width": value * scale, "height": float(h)}
        parts.append(_segment(chart, row, name, value, box))
        x += value * scale
    middle = y + h / 2 + 5
    label = _esc(row.label)
    parts.append(el("text", label, x=left - 10, y=middle, class_="label", text_anchor="end"))
    parts.append(el("text", str(sum(row.values)), x=x + 6, y=middle, class_="value"))
    return "".join(parts)


# --------------------------------------------------------------------------- HTML


CSS = f"""
body{{font-family:{FONT};color:#1a1a1a;background:#fff;max-width:820px;margin:24px auto;
padding:0 16px;line-height:1.5}}
h1{{font-size:26px;margin:0 0 4px}} h2{{font-size:20px;margin:32px 0 8px;
border-bottom:2px solid #e5e5e5;padding-bottom:4px}}
.meta{{color:#555;font-size:14px}} table{{border-collapse:collapse;margin:8px 0;font-size:14px}}
th,td{{border:1px solid #d0d0d0;padding:4px 10px;text-align:left}} th{{background:#f3f3f3}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}
.cards{{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}}
.card{{border:1px solid #d0d0d0;border-radius:6px;padding:10px 14px;min-width:140px}}
.card b{{display:block;font-size:24px}} .card span{{font-size:13px;color:#444}}
svg{{max-width:100%;height:auto;font-family:{FONT}}} svg .grid{{stroke:#e2e2e2}}
svg .tick{{font-size:13px;fill:#333}} svg .label{{font-size:14px;fill:#1a1a1a}}
svg .value{{font-size:13px;fill:#1a1a1a;font-weight:600}}
svg .axis{{font-size:14px;fill:#333}} svg .legend{{font-size:14px;fill:#1a1a1a}}
.bad{{color:#a33}} .ok{{color:#06623b}}
"""


def html_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _td(value: object) -> str:
    numeric = isinstance(value, int | float) or str(value).rstrip("%").replace(".", "").isdigit()
    return f'<td class="n">{_esc(value)}</td>' if numeric else f"<td>{_esc(value)}</td>"


def render_html(stats: dict[str, Any], lang: str = "en") -> str:
    t = labels(lang)
    title = f"{t['title']} — {stats['window']['label']}"
    body = [f"<h1>{_esc(title)}</h1>", f'<p class="meta">{_esc(_window_line(stats, t))}</p>']
    body += [_cards(stats, t), f"<h2>{_esc(t['summary'])}</h2>"]
    body.append(html_table([t["figure"], t["count"], t["rate"]], summary_rows(stats, t)))
    body += _day_section(stats, lang) + _codes_section(stats, t) + _member_section(stats, t)
    body += _integrity_section(stats, t)
    doc_lang = "zh-CN" if lang == "zh" else "en"
    return (
        f'<!DOCTYPE html>\n<html lang="{doc_lang}"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def _cards(stats: dict[str, Any], t: dict[str, str]) -> str:
    tot, app = stats["totals"], stats["appeals"]
    cards = [(t["verifications"], str(tot["total"])), (t["blocked"], pct(tot["blocked_rate"]))]
    cards += [(t[i.name], str(stats["intercepted"][i.name])) for i in INTERCEPTS]
    cards += [("p95 ms", num(stats["latency_ms"]["p95"]))]
    cards += [(t["fp_rate"], pct(app["false_positive_rate"]))]
    inner = [el("div", el("b", _esc(v)) + el("span", _esc(k)), class_="card") for k, v in cards]
    return el("div", "".join(inner), class_="cards")


def decision_chart(t: dict[str, str], title: str) -> Chart:
    return Chart(_decision_names(t), [COLOURS[d] for d in DECISIONS], title)


def _day_section(stats: dict[str, Any], lang: str) -> list[str]:
    t = labels(lang)
    rows = day_rows(stats, lang)
    chart = column_chart(rows, decision_chart(t, t["per_day"]), (t["axis_count"], t["axis_day"]))
    table = html_table([t["day"], *_decision_names(t), t["total"]], _table(rows))
    return [el("h2", _esc(t["per_day"])), chart, table]


def _codes_section(stats: dict[str, Any], t: dict[str, str]) -> list[str]:
    rows = top_code_rows(stats)
    out = [el("h2", _esc(t["top_codes"]))]
    if not rows:
        return [*out, el("p", _esc(t["none"]))]
    colours = [COLOURS["rejected"], COLOURS["fallback"], "#999999"]
    chart = Chart([t["rejected"], t["fallback"], t["warn"]], colours, t["top_codes"])
    out += [bar_chart(rows, chart, t["failed"]), html_table(*code_table(stats, t))]
    reasons = [[r["code"], r["count"], r["example"]] for r in stats["top_rejection_reasons"]]
    head = [t["code"], t["count"], t["example"]]
    return [*out, el("h2", _esc(t["reasons"])), html_table(head, reasons)]


def _member_section(stats: dict[str, Any], t: dict[str, str]) -> list[str]:
    rows = member_rows(stats)
    out = [el("h2", _esc(t["per_member"]))]
    if not rows:
        return [*out, el("p", _esc(t["none"]))]
    out.append(bar_chart(rows, decision_chart(t, t["per_member"]), t["axis_count"]))
    out.append(html_table(member_head(t), member_table_rows(stats)))
    return out


def _integrity_section(stats: dict[str, Any], t: dict[str, str]) -> list[str]:
    i = stats["integrity"]
    out = [el("h2", _esc(t["integrity"]))]
    if i["ok"]:
        return [*out, el("p", _esc(t["integrity_ok"]), class_="ok")]
    out.append(el("p", _esc(t["integrity_bad"]), class_="bad"))
    out.append(html_table(["", t["count"]], integrity_rows(stats)))
    examples = [[e["line"], e["id"] or "", e["problem"]] for e in i["examples"]]
    return [*out, html_table(["line", "id", "problem"], examples)]
