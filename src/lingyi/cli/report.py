"""``lingyi report``: the weekly report as Markdown and a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click

from lingyi import report as weekly
from lingyi.cli._app import EXIT_OK, App, cli, entry, json_option
from lingyi.cli.stats import require_named_log


@cli.command("report", short_help="Weekly report (Markdown and HTML).")
@click.option("--week", help="ISO week such as 2026-W48 (default: the last full week).")
@click.option("--tz", help="IANA zone the week is counted in (default: config, machine).")
@click.option(
    "--out",
    default="reports",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["md", "html", "both"]), default="both", show_default=True
)
@click.option(
    "--lang",
    type=click.Choice(["zh", "en"]),
    help="Language of the report (default: the config's).",
)
@json_option
@entry
def report(
    app: App, week: str | None, tz: str | None, out: Path, fmt: str, lang: str | None, as_json: bool
) -> int:
    """Write the report of one ISO week as lingyi-report-<week>.md and .html in --out, print
    the paths written, and say on stderr which week it was and how many verifications it held
    (with the current week to report on when the one written was empty)."""
    formats = ("md", "html") if fmt == "both" else (fmt,)
    done = weekly.write_weekly(
        require_named_log(app), week, out=out, tz=tz, formats=formats, lang=lang
    )
    if as_json:
        app.json({"ok": True, "written": [str(p) for p in done.paths], "week": done.week,
                  "verifications": done.verifications, "current_week": done.current_week,
                  "current_verifications": done.current_verifications})  # fmt: skip
        return EXIT_OK
    app.out("\n".join(str(p) for p in done.paths))
    app.err(f"report of {done.week}: {done.verifications} verifications")
    if done.current_week is not None:
        app.err(f"{done.week} is empty; the current week {done.current_week} has "
                f"{done.current_verifications} so far: lingyi report --week {done.current_week}")  # fmt: skip
    return EXIT_OK
