"""The weekly report: Markdown and a self-contained HTML page with SVG charts.

| module | owns |
|---|---|
| :mod:`~lingyi.report.labels` | the report's words, from the message catalog (zh, en) |
| :mod:`~lingyi.report.figures` | the tables and chart rows both formats show |
| :mod:`~lingyi.report.markdown` | the Markdown |
| :mod:`~lingyi.report.charts` | the small SVG kit (column and bar charts) |
| :mod:`~lingyi.report.html` | the HTML page, a Jinja2 template with autoescaping |

Both formats are rendered from the stats JSON (:mod:`lingyi.stats`) of one ISO week in the
configured zone, so the report and ``lingyi stats --json`` never disagree; the language is
the config's unless ``lang`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lingyi.config import Config
from lingyi.log.setup import log_keys
from lingyi.report.charts import nice_ceiling
from lingyi.report.figures import num, pct
from lingyi.report.html import render_html
from lingyi.report.labels import Labels, ReportError, report_language
from lingyi.report.markdown import render_markdown
from lingyi.stats import compute_stats, resolve_zone, week_window, with_review

FORMATS = ("md", "html")
_RENDERERS = {"md": render_markdown, "html": render_html}


def weekly_stats(config: Config, week: str | None = None, tz: str | None = None) -> dict[str, Any]:
    """The stats JSON of one ISO week (default: the last full week) in the zone, from the
    rollup beside the log (the same figures as a pass over the whole log), with the week
    before it and the records to act on (``review``)."""
    window = week_window(week, resolve_zone(tz, config))
    figures = compute_stats(config.log_path, window, keys=log_keys(config), rollup=True)
    return with_review(figures, config.log_path, window)


def weekly_report_markdown(
    config: Config, week: str | None = None, tz: str | None = None, lang: str | None = None
) -> str:
    """The weekly report as Markdown (for the MCP weekly report resource)."""
    language = report_language(lang, config)
    return render_markdown(weekly_stats(config, week, tz), language)


def write_report(
    config: Config,
    week: str | None = None,
    *,
    out: Path = Path("reports"),
    formats: Sequence[str] = FORMATS,
    tz: str | None = None,
    lang: str | None = None,
) -> list[Path]:
    """Write ``lingyi-report-<week>.md`` / ``.html`` into ``out``; return the paths."""
    unknown = [f for f in formats if f not in _RENDERERS]
    if unknown:
        raise ReportError(f"no report format {unknown[0]!r}: use {' or '.join(FORMATS)}")
    language = report_language(lang, config)
    stats = weekly_stats(config, week, tz)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out / f"lingyi-report-{stats['window']['label']}.{fmt}"
        path.write_text(_RENDERERS[fmt](stats, language), encoding="utf-8", newline="\n")
        written.append(path)
    return written


__all__ = [
    "FORMATS",
    "Labels",
    "ReportError",
    "nice_ceiling",
    "num",
    "pct",
    "render_html",
    "render_markdown",
    "report_language",
    "weekly_report_markdown",
    "weekly_stats",
    "write_report",
]
