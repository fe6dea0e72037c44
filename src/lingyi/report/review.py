"""The parts of the report a reviewer acts on: what changed since the week before, appeals to
decide, false positives measured by appeals, examples, the drill-down per member, unknown
members, and the policy versions and shadow decisions of the week.

Built from the stats JSON with its ``previous``, ``change``, ``largest_changes``,
``unknown_members`` and ``review`` objects (:mod:`lingyi.stats`); a stats object without one
of them (an older caller) gives an empty part, never an error. Plain data, escaped by whoever
renders it.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any

from lingyi.report.figures import Stats, Table, fp_cell, pct, signed
from lingyi.report.labels import Labels
from lingyi.stats import DECISIONS, WindowError, resolve_zone


def _zone(stats: Stats) -> tzinfo:
    try:
        return resolve_zone(str(stats["window"]["tz"]))
    except WindowError:
        return UTC


def local(ts: str | None, zone: tzinfo) -> str:
    """A log timestamp as the reader's local time, to the minute (the week is local too)."""
    if not ts:
        return "–"
    return datetime.fromisoformat(ts).astimezone(zone).strftime("%Y-%m-%d %H:%M")


def review_of(stats: Stats) -> dict[str, Any]:
    review = stats.get("review")
    return review if isinstance(review, dict) else {}


def previous_label(stats: Stats) -> str:
    previous = stats.get("previous")
    return str(previous["window"]["label"]) if isinstance(previous, dict) else "–"


def records_line(stats: Stats, t: Labels) -> str:
    """How many verifications this week held, and the week before."""
    before = stats.get("previous", {}).get("totals", {}).get("total", 0)
    count = stats["totals"]["total"]
    return t.fmt("records_line", count=count, previous=before, label=previous_label(stats))


def change_lines(stats: Stats, t: Labels) -> list[str]:
    """The largest member × check changes in plain words."""
    out = []
    for row in stats.get("largest_changes", []):
        key = "change_up" if row["change"] > 0 else "change_down"
        out.append(t.fmt(key, member=row["member"], code=row["code"], failed=row["failed"],
                         change=abs(row["change"]), previous=row["previous"],
                         before=pct(row["previous_fail_rate"]), after=pct(row["fail_rate"])))  # fmt: skip
    return out


# --------------------------------------------------------------------------- appeals


def appeals_table(stats: Stats, t: Labels) -> Table:
    """Open appeals, oldest first: what was decided, on what, why it was appealed, how to
    decide it."""
    head = [t["age_days"], t["member"], t["decision"], t["codes"], t["content"]]
    head += [t["appeal_reason"], t["command"]]
    rows: list[list[object]] = [
        ["–" if a["age_days"] is None else f"{a['age_days']:.1f}", a["member"],
         t[a["decision"]] if a["decision"] in DECISIONS else a["decision"] or "–",
         ", ".join(a["codes"]) or "–", a["content"] or "–", a["reason"],
         a["command"]]
        for a in review_of(stats).get("open_appeals", [])
    ]  # fmt: skip
    return Table(head, rows)


def appeals_more(stats: Stats, t: Labels) -> str | None:
    review = review_of(stats)
    listed, total = len(review.get("open_appeals", [])), review.get("open_appeals_total", 0)
    return t.fmt("to_decide_more", shown=listed, total=total) if total > listed else None


def fp_table(stats: Stats, t: Labels) -> Table:
    """The measured false-positive rate over all, per member and per check with appeals."""
    head = [t["group"], "", t["overturned"], t["fp_resolved"], t["fp_measured"], t["fp_rate"]]
    groups = [(t["total"], "", stats["appeals"])]
    groups += [(t["member"], m, v["appeals"]) for m, v in stats["by_member"].items()
               if v["appeals"]["filed"]]  # fmt: skip
    groups += [(t["code"], c, v["appeals"]) for c, v in stats["by_code"].items()
               if v["appeals"]["filed"]]  # fmt: skip
    rows: list[list[object]] = [
        [kind, name, a["overturned"], a.get("resolved_blocks", 0), fp_cell(a, t),
         pct(a["false_positive_rate"])]
        for kind, name, a in groups
    ]  # fmt: skip
    return Table(head, rows)


# --------------------------------------------------------------------------- examples


def example_tables(stats: Stats, t: Labels) -> list[tuple[str, Table]]:
    """Per top failing check, its sampled rejections."""
    head = [t["when"], t["member"], t["content"], t["reason"], t["record_id"]]
    out, zone = [], _zone(stats)
    for code, examples in review_of(stats).get("examples", {}).items():
        rows: list[list[object]] = [
            [local(e["ts"], zone), e["member"], e["content"], e["reason"], e["id"]]
            for e in examples
        ]
        if rows:
            out.append((code, Table(head, rows)))
    return out


# --------------------------------------------------------------------------- members


def drill_tables(stats: Stats, t: Labels) -> list[tuple[str, Table]]:
    """Per known member, decisions by check (failing checks first) with the week before."""
    head = [t["code"], t["checked"], t["failed"], *(t[d] for d in DECISIONS[1:]), t["warn"]]
    head += [t["fail_rate"], t["previous_short"], t["change"]]
    before = stats.get("previous", {}).get("by_member", {})
    out = []
    for member, figures in stats["by_member"].items():
        if member in stats.get("unknown_members", {}):
            continue
        prior = before.get(member, {}).get("by_code", {})
        rows = _drill_rows(figures["by_code"], prior)
        if rows:  # a member none of whose checks failed, this week or the one before: no table
            out.append((member, Table(head, rows)))
    return out


def _drill_rows(codes: dict[str, Any], prior: dict[str, Any]) -> list[list[object]]:
    """The checks that failed this week or the week before, most failures first."""
    empty = {"checked": 0, "failed": 0, "rejected": 0, "fallback": 0, "approved": 0}
    every = {code: codes.get(code, {**empty, "fail_rate": None}) for code in {*codes, *prior}}
    ranked = sorted(every.items(), key=lambda kv: (-kv[1]["failed"], kv[0]))
    rows: list[list[object]] = []
    for code, c in ranked:
        was = prior.get(code, {}).get("failed", 0)
        if not (c["failed"] or was):
            continue
        rows.append([code, c["checked"], c["failed"], c["rejected"], c["fallback"],
                     c["approved"], pct(c["fail_rate"]), was, signed(c["failed"] - was)])  # fmt: skip
    return rows


def unknown_table(stats: Stats, t: Labels) -> Table:
    """Unknown member names with their verifications, this week and the week before."""
    before = stats.get("previous", {}).get("unknown_members", {})
    head = [t["member"], t["total"], t["rejected"], t["previous_short"]]
    rows: list[list[object]] = [
        [name, c["total"], c["rejected"], before.get(name, {}).get("total", 0)]
        for name, c in stats.get("unknown_members", {}).items()
    ]
    return Table(head, rows)


def known_members(stats: Stats) -> dict[str, Any]:
    unknown = stats.get("unknown_members", {})
    return {m: v for m, v in stats["by_member"].items() if m not in unknown}


# --------------------------------------------------------------------------- what changed


def versions_table(stats: Stats, t: Labels) -> Table:
    zone = _zone(stats)
    head = [t["version"], t["first_seen"], t["last_seen"], t["verifications"], t["new_version"]]
    rows: list[list[object]] = [
        [v["version"], local(v["first"], zone), local(v["last"], zone), v["verifications"],
         t["yes" if v["new"] else "no"]]
        for v in review_of(stats).get("policy_versions", [])
    ]  # fmt: skip
    return Table(head, rows)


def versions_before(stats: Stats, t: Labels) -> str | None:
    before = review_of(stats).get("previous_policy_versions", [])
    if not before:
        return None
    return t.fmt("policies_before", versions=", ".join(v["version"] for v in before))


def shadow_table(stats: Stats, t: Labels) -> Table | None:
    """What a shadow policy would have decided; None when the log has no shadow records."""
    shadow = review_of(stats).get("shadow")
    if not shadow:
        return None
    rows: list[list[object]] = [
        [t.fmt("shadow_would", decision=d), n] for d, n in shadow["would_have"].items()
    ]
    rows += [[t.fmt("shadow_changed", change=c), n] for c, n in shadow["changed"].items()]
    return Table([t["figure"], t["count"]], rows)


def check_changes(stats: Stats, t: Labels) -> str | None:
    """Checks that ran this week and not the week before, and the other way round (a policy
    that gained or lost a check)."""
    now = {c for c, v in stats["by_code"].items() if v["checked"]}
    was = {c for c, v in stats.get("previous", {}).get("by_code", {}).items() if v["checked"]}
    if not was or now == was:
        return None  # a first week has nothing to compare with
    parts = []
    if added := sorted(now - was):
        parts.append(t.fmt("checks_new", codes=", ".join(added)))
    if gone := sorted(was - now):
        parts.append(t.fmt("checks_gone", codes=", ".join(gone)))
    return " ".join(parts)
