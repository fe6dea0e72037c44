"""``lingyi stats``: figures over the verification log, as text or the stable JSON."""

from __future__ import annotations

import os
from typing import Any

import click

from lingyi import report
from lingyi.cli._app import EXIT_OK, App, cli, entry, json_option
from lingyi.cli._output import text_table
from lingyi.cli.log import window_options
from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.log.records import CALL_OUTCOMES
from lingyi.log.setup import log_keys, store_path
from lingyi.stats import DECISIONS, INTERCEPTS, compute_stats, resolve_zone, window_from_args


@cli.command("stats", short_help="Figures over the verification log.")
@click.option("--member", help="Only this member.")
@window_options
@click.option(
    "--full",
    is_flag=True,
    help="Rebuild the index beside the log from the whole log first (same figures).",
)
@json_option
@entry
def stats(app: App, member: str | None, full: bool, as_json: bool, **window: Any) -> int:
    """Decisions, intercepted problems, latency, appeals and log integrity over a window
    (default: the last 7 days). --json is stable and documented in docs/stats-json.md.

    The figures come from the index kept beside the log (docs/store.md), which reads only
    the records appended since it was last brought up to date; --full rebuilds it from the
    whole log first, checking every line's chain again."""
    config = require_named_log(app)
    zone = resolve_zone(window.pop("tz"), config)
    span = window_from_args(zone, **window)
    keys, index = log_keys(config), store_path(config)
    result = compute_stats(
        config.log_path, span, member=member, keys=keys, index=index,
        checkpoints=config.checkpoints_path, rebuild=full,
    )  # fmt: skip
    if as_json:
        app.json(result, indent=2)  # a document people read as well as parse
    else:
        app.out(format_stats(result).rstrip("\n"))
    return EXIT_OK


def require_named_log(app: App) -> Config:
    """The config; a log named by ``--log`` or ``$LINGYI_LOG`` must be a file that exists (a
    typo would otherwise read as an empty week, "ok (0 records)")."""
    config = app.config()
    named = "--log" if app.log_path else "$LINGYI_LOG" if os.environ.get("LINGYI_LOG") else None
    if named and not config.log_path.is_file():
        what = "not a regular file" if config.log_path.exists() else "no such log file"
        raise LingyiError(f"{config.log_path}: {what} (named by {named})")
    return config


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
    out.append(_trend_text(s))
    out.append(_codes_text(s))
    out.append(_reasons_text(s))
    out.append(_shadow_text(s))
    out.append(_outcomes_text(s.get("outcomes") or {}))
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
        f"overturned {app['overturned']} (false-positive rate over resolved appeals "
        f"{_measured(app)}; lower bound over all blocks "
        f"{report.pct(app['false_positive_rate'])})\n" + _approvals_line(s.get("approvals") or {})
    )


def _approvals_line(events: dict[str, int]) -> str:
    """Human approvals of calls (lingyi.approvals), shown only when there were any."""
    if not any(events.values()):
        return ""
    return "Approvals: " + " · ".join(f"{name} {n}" for name, n in events.items()) + "\n"


def _outcomes_text(outcomes: dict[str, dict[str, int]]) -> str:
    """Calls let through that did not run (failed, held, refused), per tool; only if any."""
    if not outcomes:
        return ""
    head = ["tool", *CALL_OUTCOMES]
    rows = [[tool, *(str(v.get(k, 0)) for k in CALL_OUTCOMES)] for tool, v in outcomes.items()]
    return "\nCalls approved that did not run, per tool\n" + text_table(head, rows)


def _trend_text(s: dict[str, Any]) -> str:
    """The period before, the largest member × check changes, and unknown members."""
    lines = []
    if "previous" in s:
        before, change = s["previous"], s["change"]["totals"]
        rate = change.get("blocked_rate")
        shown = "–" if rate is None else f"{rate * 100:+.1f} pp"
        lines.append(f"\nPrevious period ({before['window']['label']}): "
                     f"{before['totals']['total']} verifications "
                     f"(change {change['total']:+d}, blocked rate {shown})")  # fmt: skip
    for c in s.get("largest_changes", []):
        lines.append(f"  {c['member']} · {c['code']}: failed {c['previous']} → {c['failed']}")
    if s.get("unknown_members"):
        names = ", ".join(f"{m} ({v['total']})" for m, v in s["unknown_members"].items())
        lines.append(f"Unknown members (member.known failed): {names}")
    return "\n".join(lines) + "\n" if lines else ""


def _measured(appeals: dict[str, Any]) -> str:
    rate, resolved = appeals.get("measured_fp_rate"), appeals.get("resolved_blocks", 0)
    if rate is None:
        return f"no data, {resolved} < {appeals.get('measured_fp_min', 0)} resolved"
    return f"{report.pct(rate)} of {resolved}"


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
    if not rows:
        return ""
    return "\nTop rejection reasons\n" + text_table(["code", "count", "example"], rows)


def _shadow_text(s: dict[str, Any]) -> str:
    """What the checks in shadow mode would have decided (nothing when none ran)."""
    shadow = s.get("shadow") or {}
    if not shadow.get("verifications"):
        return ""
    would = shadow["would_have"]
    decisions = " · ".join(f"{d} {would[d]} ({report.pct(would[f'{d}_rate'])})" for d in DECISIONS)
    changed = " · ".join(f"{k} {n}" for k, n in shadow["changed"].items()) or "none"
    lines = [
        f"\nShadow mode: {shadow['verifications']} verifications ran checks in shadow",
        f"Would have: {decisions}",
        f"Changed: {changed}",
    ]
    rows = [[code, n, *(shadow["by_code"].get(code, {}).get(d, 0) for d in DECISIONS)]
            for code, n in shadow["codes"].items()]  # fmt: skip
    table = text_table(["shadow check", "would block", *DECISIONS], rows) if rows else ""
    return "\n".join(lines) + "\n" + table


def _integrity_text(i: dict[str, Any]) -> str:
    if i["ok"]:
        return f"\nLog integrity: ok ({i['records']} records)\n"
    counts = ", ".join(
        [f"{k} {i[k]}" for k in ("unreadable", "invalid", "chain_breaks", "unknown_schema") if i[k]]
        + (["checkpoints failed"] if i.get("checkpoints_ok") is False else [])
    )
    lines = [f"\nLog integrity: PROBLEMS ({counts}); figures count authenticated records only"]
    lines += [f"  line {e['line']} {e['id'] or ''}: {e['problem']}" for e in i["examples"]]
    return "\n".join(lines) + "\n"
