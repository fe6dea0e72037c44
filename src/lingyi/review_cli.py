"""CLI for reviewing the log: ``stats``, ``report``, ``appeal``, ``log tail`` and ``log query``.

The lead's ``lingyi.cli`` calls :func:`register` with its sub-parsers; every handler
takes the parsed namespace (with the global ``config`` and ``log`` options) and returns
the exit code. :func:`build_parser` and :func:`main` give the same commands standalone
(``python -m lingyi.review_cli``), which the tests use. Output goes to stdout, errors to
stderr as ``lingyi: error: …`` with exit code 2 (bad input, as everywhere in lingyi).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from lingyi import report
from lingyi.config import Config, load_config
from lingyi.errors import LingyiError
from lingyi.log import appeals
from lingyi.log import query as logquery
from lingyi.stats import (
    DECISIONS,
    INTERCEPTS,
    compute_stats,
    days_window,
    parse_instant,
    resolve_zone,
    window_from_args,
)

Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:  # generic only in the stubs, not at run time
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    log_sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add ``stats``, ``report``, ``appeal`` to ``sub`` and ``tail``, ``query`` to ``log_sub``."""
    _add_stats(sub)
    _add_report(sub)
    _add_appeal(sub)
    _add_tail(log_sub)
    _add_query(log_sub)


def _cli(handler: Handler) -> Handler:
    """Turn LingyiError into a one-line message and exit code 2; keep logs off stdout."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        if not structlog.is_configured():  # stdout is for output (JSON); logs go to stderr
            structlog.configure(logger_factory=_stderr_logger)
        try:
            return handler(args)
        except LingyiError as exc:
            sys.stderr.write(f"lingyi: error: {exc}\n")
            return 2

    return run


def _stderr_logger(*_: object) -> structlog.PrintLogger:
    # Looked up at each use, not bound once: sys.stderr may be replaced (tests, daemons).
    return structlog.PrintLogger(sys.stderr)


def _config(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None), log=getattr(args, "log", None))


def _add_window(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, help="the last N local days, today included")
    parser.add_argument("--since", help="first local day (YYYY-MM-DD) or an ISO date-time")
    parser.add_argument("--until", help="last local day, included (YYYY-MM-DD) or date-time")
    parser.add_argument("--tz", help="IANA zone for days and weeks (default: config, machine)")


# --------------------------------------------------------------------------- stats


def _add_stats(sub: SubParsers) -> None:
    p = sub.add_parser(
        "stats",
        help="figures over the verification log",
        description="Decisions, intercepted problems, latency, appeals and log integrity "
        "over a time window (default: the last 7 days). --json is documented in "
        "docs/stats-json.md.",
    )
    _add_window(p)
    p.add_argument("--member", help="only this member")
    p.add_argument("--json", action="store_true", help="print the stable JSON")
    p.set_defaults(func=cmd_stats)


@_cli
def cmd_stats(args: argparse.Namespace) -> int:
    config = _config(args)
    zone = resolve_zone(args.tz, config)
    window = window_from_args(zone, days=args.days, since=args.since, until=args.until)
    result = compute_stats(config.log_path, window, member=args.member)
    if args.json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(format_stats(result))
    return 0


def _is_number(text: str) -> bool:
    return text.rstrip("%").replace(".", "", 1).replace("-", "", 1).isdigit() or text == "–"


def text_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to terminal width (CJK counts double); numbers right-aligned."""
    cells = [[str(c) for c in row] for row in [head, *rows]]
    widths = [max(logquery.text_width(row[i]) for row in cells) for i in range(len(head))]
    right = [all(_is_number(row[i]) for row in cells[1:]) for i in range(len(head))]
    lines = []
    for row in cells:
        padded = [logquery.pad(c, w, right=r) for c, w, r in zip(row, widths, right, strict=True)]
        lines.append("  " + "  ".join(padded).rstrip())
    return "\n".join(lines) + "\n"


def _counts_row(name: str, c: dict[str, Any]) -> list[object]:
    return [name, c["total"], *(c[d] for d in DECISIONS), report.pct(c["blocked_rate"])]


def format_stats(s: dict[str, Any]) -> str:
    """The human summary of the stats JSON."""
    out = [_stats_header(s)]
    head = ["", "total", *DECISIONS, "blocked"]
    for title, key in (
        ("Per member", "by_member"),
        ("Per type", "by_type"),
        ("Per tool", "by_tool"),
    ):
        rows = [_counts_row(k, v) for k, v in s[key].items()]
        if rows:
            out.append(f"\n{title}\n" + text_table(head, rows))
    out.append(_codes_text(s))
    out.append(_reasons_text(s))
    out.append(_integrity_text(s["integrity"]))
    return "".join(out)


def _stats_header(s: dict[str, Any]) -> str:
    w, t, lat, app = s["window"], s["totals"], s["latency_ms"], s["appeals"]
    days = s["by_day"]
    span = f"{days[0]['date']} .. {days[-1]['date']}" if days else ""
    member = f", member {s['member']}" if s["member"] else ""
    label = w["label"] if w["label"] == span else f"{w['label']}: {span}"
    decisions = " · ".join(f"{d} {t[d]} ({report.pct(t[f'{d}_rate'])})" for d in DECISIONS)
    caught = " · ".join(
        f"{i.name.replace('_', ' ')} {s['intercepted'][i.name]}" for i in INTERCEPTS
    )
    return (
        f"LingYi Guard stats — {label} ({w['tz']}{member})\n"
        f"Verifications {t['total']}: {decisions}\n"
        f"Intercepted: {caught}\n"
        f"Latency ms: p50 {report.num(lat['p50'])} · p95 {report.num(lat['p95'])} · "
        f"p99 {report.num(lat['p99'])} (n={lat['count']})\n"
        f"Appeals: filed {app['filed']} · open {app['open']} · upheld {app['upheld']} · "
        f"overturned {app['overturned']} (false-positive rate "
        f"{report.pct(app['false_positive_rate'])})\n"
    )


def _codes_text(s: dict[str, Any]) -> str:
    head = ["code", "checked", "failed", "rejected", "fallback", "warn", "overturned", "FP rate"]
    rows = [
        [code, c["checked"], c["failed"], c["rejected"], c["fallback"], c["approved"],
         c["appeals"]["overturned"], report.pct(c["appeals"]["false_positive_rate"])]
        for code, c in s["by_code"].items()
        if c["failed"] or c["appeals"]["filed"]
    ]  # fmt: skip
    return "\nFailed checks\n" + text_table(head, rows) if rows else ""


def _reasons_text(s: dict[str, Any]) -> str:
    rows = [[r["code"], r["count"], r["example"][:80]] for r in s["top_rejection_reasons"]]
    return (
        "\nTop rejection reasons\n" + text_table(["code", "count", "example"], rows) if rows else ""
    )


def _integrity_text(i: dict[str, Any]) -> str:
    if i["ok"]:
        return f"\nLog integrity: ok ({i['records']} records)\n"
    counts = ", ".join(
        f"{k} {i[k]}" for k in ("unreadable", "invalid", "chain_breaks", "unknown_schema") if i[k]
    )
    lines = [f"\nLog integrity: PROBLEMS ({counts}); figures include every readable record"]
    lines += [f"  line {e['line']} {e['id'] or ''}: {e['problem']}" for e in i["examples"]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- report


def _add_report(sub: SubParsers) -> None:
    p = sub.add_parser(
        "report",
        help="weekly report (Markdown and HTML)",
        description="Write the report of one ISO week (default: the last full week) as "
        "lingyi-report-<week>.md and .html in --out.",
    )
    p.add_argument("--week", help="ISO week such as 2026-W48 (default: the last full week)")
    p.add_argument("--tz", help="IANA zone the week is counted in (default: config, machine)")
    p.add_argument("--out", default="reports", help="output folder (default: ./reports)")
    p.add_argument("--format", choices=("md", "html", "both"), default="both")
    p.set_defaults(func=cmd_report)


@_cli
def cmd_report(args: argparse.Namespace) -> int:
    formats = ("md", "html") if args.format == "both" else (args.format,)
    paths = report.write_report(
        _config(args), args.week, out=Path(args.out), tz=args.tz, formats=formats
    )
    sys.stdout.write("".join(f"{p}\n" for p in paths))
    return 0


# --------------------------------------------------------------------------- appeals


def _add_appeal(sub: SubParsers) -> None:
    p = sub.add_parser(
        "appeal",
        help="appeal a verification, resolve an appeal, list appeals",
        description="lingyi appeal ID --reason TEXT | "
        "lingyi appeal resolve ID (--uphold|--overturn) --note TEXT | lingyi appeal list",
    )
    p.add_argument("words", nargs="+", metavar="ID | resolve ID | list")
    p.add_argument("--reason", help="why the verdict was wrong (filing an appeal)")
    outcome = p.add_mutually_exclusive_group()
    outcome.add_argument("--uphold", dest="outcome", action="store_const", const="upheld")
    outcome.add_argument("--overturn", dest="outcome", action="store_const", const="overturned")
    p.add_argument("--note", help="the reviewer's note (resolving)")
    p.add_argument("--by", help="who is acting (default: $LINGYI_USER or the login name)")
    p.add_argument("--open", action="store_true", help="list only open appeals")
    p.add_argument("--json", action="store_true", help="print records as JSON")
    p.set_defaults(func=cmd_appeal)


@_cli
def cmd_appeal(args: argparse.Namespace) -> int:
    words = args.words
    if words == ["list"]:
        return _appeal_list(args)
    if len(words) == 2 and words[0] == "resolve":
        return _appeal_resolve(args, words[1])
    if len(words) == 1:
        return _appeal_file(args, words[0])
    raise LingyiError("usage: lingyi appeal ID --reason TEXT | appeal resolve ID ... | appeal list")


def _appeal_file(args: argparse.Namespace, ref: str) -> int:
    if not args.reason:
        raise LingyiError('filing an appeal needs --reason "why the verdict was wrong"')
    record = appeals.file_appeal(_config(args).log_path, ref, args.reason, args.by)
    _print_record(args, record, f"appeal {record['id']} recorded against {ref}")
    return 0


def _appeal_resolve(args: argparse.Namespace, ref: str) -> int:
    if args.outcome is None:
        raise LingyiError("resolving an appeal needs --uphold or --overturn")
    if not args.note:
        raise LingyiError('resolving an appeal needs --note "the reason for the decision"')
    path = _config(args).log_path
    record = appeals.resolve_appeal(path, ref, args.outcome, args.note, args.by)
    text = f"appeal {record['appeal_id']} {record['outcome']} (verification {record['appeal_of']})"
    _print_record(args, record, text)
    return 0


def _print_record(args: argparse.Namespace, record: dict[str, Any], text: str) -> None:
    sys.stdout.write((logquery.format_jsonl(record) if args.json else text) + "\n")


def _appeal_list(args: argparse.Namespace) -> int:
    rows = appeals.list_appeals(_config(args).log_path, open_only=args.open)
    if args.json:
        sys.stdout.write("".join(logquery.format_jsonl(r) + "\n" for r in rows))
        return 0
    head = ["appeal", "status", "verification", "member", "decision", "by", "reason"]
    table = [
        [r["id"], r["status"], r["appeal_of"], r["member"], r["decision"], r["by"], r["reason"]]
        for r in rows
    ]
    sys.stdout.write(text_table(head, table) if table else "no appeals\n")
    return 0


# --------------------------------------------------------------------------- log tail/query


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--member", help="member name")
    parser.add_argument("--decision", choices=DECISIONS)
    parser.add_argument("--code", help="a check code that failed (globs: 'boundary.*')")
    parser.add_argument("--tool", help="tool name (globs allowed)")
    parser.add_argument("--session", help="session id")
    parser.add_argument("--text", help="text in content, reason, recommendation or notes")
    parser.add_argument("--kind", choices=logquery.KINDS, default="all", help="record kind")
    _add_window(parser)
    parser.add_argument("--json", action="store_true", help="print JSONL (one record a line)")


def _add_tail(log_sub: SubParsers) -> None:
    p = log_sub.add_parser("tail", help="the last records of the log (filters allowed)")
    p.add_argument("-n", "--lines", type=int, default=20, help="how many (default 20)")
    _add_filters(p)
    p.set_defaults(func=cmd_tail)


def _add_query(log_sub: SubParsers) -> None:
    p = log_sub.add_parser("query", help="records of the log that match filters")
    p.add_argument("--limit", type=int, help="stop after this many matches")
    _add_filters(p)
    p.set_defaults(func=cmd_query)


def build_query(args: argparse.Namespace, config: Config) -> logquery.Query:
    zone = resolve_zone(args.tz, config)
    start = parse_instant(args.since, zone) if args.since else None
    end = parse_instant(args.until, zone, end=True) if args.until else None
    if args.days is not None:
        if start or end:
            raise LingyiError("use --days or --since/--until, not both")
        window = days_window(args.days, zone)
        start, end = window.start, window.end
    return logquery.Query(
        member=args.member,
        decision=args.decision,
        code=args.code,
        tool=args.tool,
        session=args.session,
        start=start,
        end=end,
        text=args.text,
        kind=args.kind,
    )


@_cli
def cmd_tail(args: argparse.Namespace) -> int:
    config, skipped = _config(args), logquery.Skipped()
    records = logquery.tail_log(
        config.log_path, build_query(args, config), args.lines, skipped=skipped
    )
    _print_records(args, config, records, skipped)
    return 0


@_cli
def cmd_query(args: argparse.Namespace) -> int:
    config, skipped = _config(args), logquery.Skipped()
    query = build_query(args, config)
    records = logquery.query_log(config.log_path, query, limit=args.limit, skipped=skipped)
    _print_records(args, config, records, skipped)
    return 0


def _print_records(
    args: argparse.Namespace, config: Config, records: Any, skipped: logquery.Skipped
) -> None:
    zone = resolve_zone(args.tz, config)
    for record in records:
        line = logquery.format_jsonl(record) if args.json else logquery.format_human(record, zone)
        sys.stdout.write(line + "\n")
    if skipped.count:
        sys.stderr.write(
            f"lingyi: skipped {skipped.count} unreadable line(s) ({'; '.join(skipped.first)}); "
            "see lingyi log verify\n"
        )


# --------------------------------------------------------------------------- standalone


def build_parser() -> argparse.ArgumentParser:
    """The review commands with the global --config/--log options, as lingyi.cli has them."""
    parser = argparse.ArgumentParser(prog="lingyi")
    parser.add_argument("--config", help="config file")
    parser.add_argument("--log", help="verification log (overrides the config)")
    sub = parser.add_subparsers(dest="command", required=True)
    log_parser = sub.add_parser("log", help="read the verification log")
    log_sub = log_parser.add_subparsers(dest="log_command", required=True)
    register(sub, log_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.func
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
