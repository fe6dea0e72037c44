"""Week over week: the figures of the period before, the change of each, and the largest
changes per member and check.

The previous period is counted from the same index as the current one, the same way, so
the two are comparable figure for figure. ``change`` has the shape of the
figures it compares: every number is ``current − previous``; a count that one period does not
have counts as 0 there, a rate or latency that one period does not have gives ``null``;
texts and lists (days, examples) have no change and are left out.
"""

from __future__ import annotations

from typing import Any

# The figures compared (each a top-level field of the stats JSON).
COMPARED = (
    "totals",
    "by_member",
    "by_type",
    "by_tool",
    "by_code",
    "intercepted",
    "latency_ms",
    "appeals",
    "judge",
    "unknown_members",
)
LARGEST = 5  # member × check changes listed at the top of the report


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def delta(current: object, previous: object) -> Any:
    """``current − previous`` for every number in two figures of the same shape."""
    if isinstance(current, dict) or isinstance(previous, dict):
        now = current if isinstance(current, dict) else {}
        before = previous if isinstance(previous, dict) else {}
        out = {}
        for key in sorted(set(now) | set(before)):
            change = delta(now.get(key), before.get(key))
            if change is not _NONE:
                out[key] = change
        return out
    return _leaf(current, previous)


_NONE = object()  # no change to show (a text, a list)


def _leaf(current: object, previous: object) -> object:
    if _number(current) and _number(previous):
        return round(current - previous, 6)  # type: ignore[operator]
    if isinstance(current, int) and previous is None and not isinstance(current, bool):
        return current  # a count the previous period did not have: it had 0
    if isinstance(previous, int) and current is None and not isinstance(previous, bool):
        return -previous
    if (current is None and previous is None) or _number(current) or _number(previous):
        return None  # a rate or latency one period has no value for
    return _NONE


def previous_json(previous: dict[str, Any]) -> dict[str, Any]:
    """The previous period's figures (``previous`` of the stats JSON)."""
    return {"window": previous["window"], **{k: previous[k] for k in COMPARED}}


def largest_changes(current: dict[str, Any], previous: dict[str, Any]) -> list[dict[str, Any]]:
    """The member × check pairs whose failures changed most, largest first (then by name)."""
    now, before = _failures(current), _failures(previous)
    rows = []
    for member, code in set(now) | set(before):
        cur, prev = now.get((member, code), {}), before.get((member, code), {})
        change = cur.get("failed", 0) - prev.get("failed", 0)
        if change:
            rows.append(_change_row(member, code, cur, prev, change))
    rows.sort(key=lambda r: (-abs(r["change"]), -r["change"], r["member"], r["code"]))
    return rows[:LARGEST]


def _failures(stats: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (member, code): figures
        for member, m in stats["by_member"].items()
        for code, figures in m.get("by_code", {}).items()
        if figures["failed"]
    }


def _change_row(
    member: str, code: str, cur: dict[str, Any], prev: dict[str, Any], change: int
) -> dict[str, Any]:
    return {
        "member": member,
        "code": code,
        "failed": cur.get("failed", 0),
        "previous": prev.get("failed", 0),
        "change": change,
        "checked": cur.get("checked", 0),
        "previous_checked": prev.get("checked", 0),
        "fail_rate": cur.get("fail_rate"),
        "previous_fail_rate": prev.get("fail_rate"),
    }


def trend_json(current: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """The fields the stats JSON gains from the period before: previous, change, largest."""
    return {
        "previous": previous_json(previous),
        "change": {k: delta(current[k], previous[k]) for k in COMPARED},
        "largest_changes": largest_changes(current, previous),
    }
