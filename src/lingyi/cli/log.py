"""``lingyi log verify|tail|query``: check the hash chain, read the last records, filter.

``verify`` takes the log to check as an argument (``lingyi log verify FILE``) or checks the
log in effect. ``tail`` and ``query`` take the same filters; unreadable lines are counted on
stderr, never dropped silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lingyi.cli._app import EXIT_FAILED, EXIT_OK, App, Group, cli, entry, json_option
from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.log import LogVerification, verify_log
from lingyi.log import query as logquery
from lingyi.log.setup import checkpoints_skipped, log_keys, store_path
from lingyi.stats import DECISIONS, days_window, parse_instant, resolve_zone

# What each guarantee detects, when it was checked (the log contract).
DETECTS = {
    "hash chain": ("edited", "deleted", "reordered"),
    "keyed chain": ("rewritten",),
    "checkpoints": ("cut off",),
}
MARKS = {"ok": ("✓", "green"), "failed": ("✗", "red"), "not checked": ("-", "yellow")}


@cli.group("log", cls=Group, short_help="The verification log: verify the chain, tail, query.")
def log_group() -> None:
    """The verification log: check its hash chain, read its last records, filter them."""


@log_group.command("verify", short_help="Check the chain, its key and checkpoints.")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--checkpoints",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Check against this checkpoint file (default: [log] checkpoints, for the config's log).",
)
@json_option
@entry
def log_verify(app: App, file: Path | None, checkpoints: Path | None, as_json: bool) -> int:
    """Check FILE (default: the log in effect): the hash chain, the keyed chain when the config
    names a key, and the checkpoints when it names a checkpoint file. Says which guarantees
    it checked; exit 1 when one fails."""
    config = app.config()
    path = file if file is not None else config.log_path
    if file is not None and not file.is_file():
        raise LingyiError(f"{file}: no such log file")
    anchor, skipped = _checkpoints_for(config, path, checkpoints)
    result = verify_log(path, log_keys(config), anchor, skipped=skipped)
    if as_json:
        app.json(verification_json(result))
    else:
        app.out(verification_text(app, result))
    return EXIT_OK if result.ok else EXIT_FAILED


def _checkpoints_for(config: Config, path: Path, given: Path | None) -> tuple[Path | None, str]:
    """The checkpoint file that belongs to ``path``, or why there is none to check."""
    if given is not None:
        return given, ""
    if path.resolve() != config.log_path.resolve():
        if config.checkpoints_path is not None:
            return (
                None,
                f"the configured checkpoints belong to {config.log_path} (use --checkpoints)",
            )
        return None, checkpoints_skipped(config)
    return config.checkpoints_path, checkpoints_skipped(config)


def verification_json(result: LogVerification) -> dict[str, Any]:
    guarantees = result.guarantees()
    checked = {g.name.replace(" ", "_"): g.status != "not checked" for g in guarantees}
    detects = [d for g in guarantees if g.status != "not checked" for d in DETECTS[g.name]]
    return {**result.as_json(), "checked": {**checked, "detects": detects}}


def verification_text(app: App, result: LogVerification) -> str:
    path, report = result.path, result.chain
    exists = "" if path.exists() else " (no log yet)"
    lines = [f"{path}: {report.records} records{exists}"]
    lines += [f"  line {n}: skipped: {e}" for n, e in report.unreadable]
    if report.first_bad:
        bad = report.first_bad
        broken = app.paint("CHAIN BROKEN", fg="red", bold=True)
        lines.append(f"  {broken} at line {bad.lineno} (record {bad.record_id}): {bad.reason}")
        lines.append(f"  {report.break_count} record(s) fail the chain in all")
    elif not result.ok:
        lines.append(f"  {app.paint('CHECKPOINTS FAIL', fg='red', bold=True)}: chain intact")
    else:
        lines.append(f"  {app.paint('chain OK', fg='green')}: every guarantee checked holds")
    for g in result.guarantees():
        mark, colour = MARKS[g.status]
        lines.append(f"  {app.paint(mark, fg=colour)} {g.name:<12} {g.status}: {g.detail}")
    return "\n".join(lines)


def window_options(fn: Any) -> Any:
    """--days, --since, --until, --tz (shared by stats, tail and query)."""
    for option in reversed(
        [
            click.option("--days", type=int, help="The last N local days, today included."),
            click.option("--since", help="First local day (YYYY-MM-DD) or an ISO date-time."),
            click.option("--until", help="Last local day, included (YYYY-MM-DD) or date-time."),
            click.option("--tz", help="IANA zone for days and weeks (default: config, machine)."),
        ]
    ):
        fn = option(fn)
    return fn


def _filters(fn: Any) -> Any:
    for option in reversed(
        [
            click.option("--member", help="Member name."),
            click.option("--decision", type=click.Choice(DECISIONS)),
            click.option("--code", help="A check code that failed (globs: 'boundary.*')."),
            click.option("--tool", help="Tool name (globs allowed)."),
            click.option("--session", help="Session id."),
            click.option("--text", help="Text in content, reason, recommendation or notes."),
            click.option(
                "--kind", type=click.Choice(logquery.KINDS), default="all", help="Record kind."
            ),
        ]
    ):
        fn = option(fn)
    return window_options(json_option(fn))


def build_query(config: Config, f: dict[str, Any]) -> logquery.Query:
    """The query of the filter options (the window in the zone in effect)."""
    zone = resolve_zone(f["tz"], config)
    start = parse_instant(f["since"], zone) if f["since"] else None
    end = parse_instant(f["until"], zone, end=True) if f["until"] else None
    if f["days"] is not None:
        if start or end:
            raise LingyiError("use --days or --since/--until, not both")
        window = days_window(f["days"], zone)
        start, end = window.start, window.end
    fields = ("member", "decision", "code", "tool", "session", "text", "kind")
    return logquery.Query(start=start, end=end, **{k: f[k] for k in fields})


@log_group.command("tail", short_help="The last records of the log (filters allowed).")
@click.option("-n", "--lines", "count", type=int, default=20, show_default=True, help="How many.")
@_filters
@entry
def log_tail(app: App, count: int, as_json: bool, **filters: Any) -> int:
    """The last records of the log that match the filters, oldest first."""
    config, skipped = app.config(), logquery.Skipped()
    query = build_query(config, filters)
    keys, index = log_keys(config), store_path(config)
    records = logquery.tail_log(
        config.log_path, query, count, skipped=skipped, keys=keys, index=index
    )
    _print_records(app, config, records, skipped, as_json=as_json, tz=filters["tz"])
    return EXIT_OK


@log_group.command("query", short_help="Records of the log that match filters.")
@click.option("--limit", type=int, help="Stop after this many matches.")
@_filters
@entry
def log_query(app: App, limit: int | None, as_json: bool, **filters: Any) -> int:
    """Every record of the log that matches the filters, in log order."""
    config, skipped = app.config(), logquery.Skipped()
    query = build_query(config, filters)
    keys, index = log_keys(config), store_path(config)
    records = logquery.query_log(
        config.log_path, query, limit=limit, skipped=skipped, keys=keys, index=index
    )
    _print_records(app, config, records, skipped, as_json=as_json, tz=filters["tz"])
    return EXIT_OK


def _print_records(
    app: App,
    config: Config,
    records: Any,
    skipped: logquery.Skipped,
    *,
    as_json: bool,
    tz: str | None,
) -> None:
    zone = resolve_zone(tz, config)
    for written in records:
        record = logquery.shown(written)
        app.out(logquery.format_jsonl(record) if as_json else logquery.format_human(record, zone))
    if skipped.count:
        app.err(
            f"lingyi: skipped {skipped.count} unreadable line(s) ({'; '.join(skipped.first)}); "
            "see lingyi log verify"
        )
