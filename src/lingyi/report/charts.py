"""A small SVG kit for the report: stacked column and bar charts, legends, axes.

Every chart is inline SVG with a title and a tooltip per segment, coloured from the
Okabe–Ito palette (safe for colour-blind readers); the report repeats each chart as a table,
so colour is never the only channel. Labels may come from the log (member names, check
codes): every text and attribute is escaped here, and a chart is returned as
:class:`markupsafe.Markup` so the HTML template inserts it as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from lingyi.report.figures import Row

COLOURS = {"approved": "#009E73", "rejected": "#D55E00", "fallback": "#0072B2"}
WARN_COLOUR = "#999999"
FONT = (
    "'Noto Sans CJK SC','Source Han Sans SC','PingFang SC','Microsoft YaHei',"
    "'Helvetica Neue',Arial,sans-serif"
)


def _esc(value: object) -> str:
    return str(escape(str(value)))


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


def column_chart(rows: list[Row], chart: Chart, axes: tuple[str, str]) -> Markup:
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
    return Markup(_svg(width, height, chart.title, "".join(body)))  # escaped by el()


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


def bar_chart(rows: list[Row], chart: Chart, axis: str) -> Markup:
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
    return Markup(_svg(width, height, chart.title, "".join(body)))  # escaped by el()


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
