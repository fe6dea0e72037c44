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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lingyi.config import Config
from lingyi.log.setup import log_keys, store_path
from lingyi.report.charts import nice_ceiling
from lingyi.report.figures import num, pct
from lingyi.report.html import render_html
from lingyi.report.labels import Labels, ReportError, report_language
from lingyi.report.markdown import render_markdown
from lingyi.stats import compute_stats, resolve_zone, week_label, week_window, with_review

FORMATS = ("md", "html")
_RENDERERS = {"md": render_markdown, "html": render_html}


def weekly_stats(
    config: Config, week: str | None = None, tz: str | None = None, member: str | None = None
) -> dict[str, Any]:
    """The stats JSON of one ISO week (default: the last full week) in the zone, from the
    index beside the log, with the week before it and the records to act on (``review``)."""
    window = week_window(week, resolve_zone(tz, config))
    keys, index = log_keys(config), store_path(config)
    figures = compute_stats(
        config.log_path, window, member=member, keys=keys, index=index,
        checkpoints=config.checkpoints_path,
    )  # fmt: skip
    return with_review(figures, config.log_path, window, member, keys=keys, index=index)


def weekly_report_markdown(
    config: Config, week: str | None = None, tz: str | None = None, lang: str | None = None
) -> str:
    """The weekly report as Markdown (for the MCP weekly report resource)."""
    language = report_language(lang, config)
    return render_markdown(weekly_stats(config, week, tz), language)


@dataclass(frozen=True)
class Written:
    """What ``lingyi report`` wrote: the files, the week, how many verifications it held,
    and, when it held none, the current week if that one has some (the hint to give)."""

    paths: list[Path]
    week: str
    verifications: int
    current_week: str | None = None
    current_verifications: int = 0


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
    return write_weekly(config, week, out=out, formats=formats, tz=tz, lang=lang).paths


def write_weekly(
    config: Config,
    week: str | None = None,
    *,
    out: Path = Path("reports"),
    formats: Sequence[str] = FORMATS,
    tz: str | None = None,
    lang: str | None = None,
) -> Written:
    """:func:`write_report`, saying which week was written and what it held."""
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
    label, total = stats["window"]["label"], stats["totals"]["total"]
    return Written(written, label, total, *(_current_week(config, tz) if not total else (None, 0)))


def _current_week(config: Config, tz: str | None) -> tuple[str | None, int]:
    """The current ISO week and its verifications so far, when it has any."""
    zone = resolve_zone(tz, config)
    label = week_label(*datetime.now(UTC).astimezone(zone).isocalendar()[:2])
    figures = compute_stats(
        config.log_path, week_window(label, zone), keys=log_keys(config), index=store_path(config)
    )
    count = int(figures["totals"]["total"])
    return (label, count) if count else (None, 0)


__all__ = [
    "FORMATS",
    "Labels",
    "ReportError",
    "Written",
    "nice_ceiling",
    "num",
    "pct",
    "render_html",
    "render_markdown",
    "report_language",
    "weekly_report_markdown",
    "weekly_stats",
    "write_report",
    "write_weekly",
]
