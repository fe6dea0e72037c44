"""The stats JSON: the documented shape (``docs/stats-json.md``) of an aggregator's counters.

``STATS_SCHEMA`` changes whenever a field changes meaning or disappears; fields are only
ever added within one schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lingyi.log.records import APPROVAL_EVENTS, CALL_OUTCOMES, ts_key
from lingyi.stats.aggregate import (
    DECISIONS,
    FALLBACK,
    REJECTED,
    Aggregator,
    Appeals,
    Tally,
)
from lingyi.stats.histogram import LatencyHistogram

STATS_SCHEMA = "lingyi.stats/1"
TOP_REASONS = 10
# Below this many resolved appeals of blocked verdicts, a measured false-positive rate says
# more about chance than about the guard: it is shown as no data (null).
MIN_RESOLVED_APPEALS = 5
UNKNOWN_MEMBER_CODE = "member.known"  # the layer's own check: a member no policy names


def _plus(a: Tally, b: Tally) -> Tally:
    return [x + y for x, y in zip(a, b, strict=True)]


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


def counts_json(tally: Tally) -> dict[str, Any]:
    """{total, approved, rejected, fallback, blocked, and their rates}."""
    total = sum(tally)
    blocked = tally[REJECTED] + tally[FALLBACK]
    out: dict[str, Any] = {"total": total}
    for name, value in zip(DECISIONS, tally, strict=True):
        out[name] = value
    out["blocked"] = blocked
    for name, value in zip(DECISIONS, tally, strict=True):
        out[f"{name}_rate"] = _rate(value, total)
    out["blocked_rate"] = _rate(blocked, total)
    return out


def appeals_json(counts: Appeals | None, blocked: int) -> dict[str, Any]:
    """Appeal figures; ``false_positive_rate`` = overturned blocks / all blocks (a lower
    bound), ``measured_fp_rate`` = overturned / resolved appeals of blocks (null below
    :data:`MIN_RESOLVED_APPEALS`)."""
    c = counts or Appeals()
    resolved = c.upheld + c.overturned + c.overturned_approvals
    resolved_blocks = c.overturned + c.upheld - c.upheld_approvals
    enough = resolved_blocks >= MIN_RESOLVED_APPEALS
    return {
        "filed": c.filed,
        "open": max(c.filed - resolved, 0),
        "upheld": c.upheld,
        "overturned": c.overturned,
        "overturned_approvals": c.overturned_approvals,
        "overturn_rate": _rate(c.overturned + c.overturned_approvals, resolved),
        "false_positive_rate": _rate(c.overturned, blocked),
        "resolved": resolved,
        "resolved_blocks": resolved_blocks,
        "measured_fp_rate": _rate(c.overturned, resolved_blocks) if enough else None,
        "measured_fp_min": MIN_RESOLVED_APPEALS,
    }


def approvals_json(events: Mapping[str, int]) -> dict[str, int]:
    """Approval events in the window (lingyi.approvals), each event named, zeros included."""
    return {name: int(events.get(name, 0)) for name in APPROVAL_EVENTS}


def outcomes_json(outcomes: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Per tool, the calls let through that did not run: each status named, zeros included."""
    return {
        tool: {status: int(outcomes[tool].get(status, 0)) for status in CALL_OUTCOMES}
        for tool in sorted(outcomes)
    }


class StatsView:
    """Turns an aggregator's counters into the documented JSON (docs/stats-json.md)."""

    def __init__(self, agg: Aggregator, integrity: dict[str, Any]) -> None:
        self.agg, self.integrity = agg, integrity

    def as_json(self) -> dict[str, Any]:
        agg = self.agg
        totals = counts_json(agg.totals)
        return {
            "schema": STATS_SCHEMA,
            "generated_at": ts_key(datetime.now(UTC)),
            "window": agg.window.as_json(),
            "member": agg.member,
            "totals": totals,
            "by_member": self._by_member(),
            "by_type": self._plain("type"),
            "by_tool": self._plain("tool"),
            "by_code": self._by_code(),
            "by_day": self._by_day(),
            "intercepted": dict(agg.intercepted),
            "latency_ms": {**agg.latency.summary(), "method": _LATENCY_METHOD},
            "top_rejection_reasons": self._top_reasons(),
            "unknown_members": self._unknown_members(),
            "appeals": appeals_json(agg.appeals.get(("all", "")), totals["blocked"]),
            "judge": agg.judge.as_json(),
            "shadow": self._shadow(),
            "approvals": approvals_json(agg.approvals),
            "outcomes": outcomes_json(agg.outcomes),
            "integrity": self.integrity,
        }

    def _plain(self, group: str) -> dict[str, Any]:
        table = self.agg.groups[group]
        return {name: counts_json(table[name]) for name in sorted(table)}

    def _by_member(self) -> dict[str, Any]:
        agg, out = self.agg, {}
        names = set(agg.groups["member"]) | {m for g, m in agg.appeals if g == "member"}
        for name in sorted(names):
            counts = counts_json(agg.groups["member"].get(name, [0, 0, 0]))
            latency = agg.member_latency.get(name, LatencyHistogram()).summary()
            appeals = appeals_json(agg.appeals.get(("member", name)), counts["blocked"])
            by_code = self._member_codes(name)
            out[name] = {**counts, "latency_ms": latency, "appeals": appeals, "by_code": by_code}
        return out

    def _member_codes(self, member: str) -> dict[str, Any]:
        """One member's checks: how often each ran, failed, and the decisions it failed in."""
        checked: Mapping[str, int] = self.agg.member_checked.get(member, {})
        codes = self.agg.member_codes.get(member, {})
        out = {}
        for code in sorted(set(checked) | set(codes)):
            failed = codes.get(code, [0, 0, 0])
            out[code] = {
                "checked": checked.get(code, 0),
                "failed": sum(failed),
                "fail_rate": _rate(sum(failed), checked.get(code, 0)),
                **dict(zip(DECISIONS, failed, strict=True)),
                "blocked": failed[REJECTED] + failed[FALLBACK],
            }
        return out

    def _unknown_members(self) -> dict[str, Any]:
        """Members the guard did not know (its ``member.known`` check failed): typos or
        someone probing, a security signal rather than a member's figures."""
        agg, out = self.agg, {}
        for name in sorted(agg.member_codes):
            if agg.member_codes[name].get(UNKNOWN_MEMBER_CODE):
                out[name] = counts_json(agg.groups["member"].get(name, [0, 0, 0]))
        return out

    def _by_code(self) -> dict[str, Any]:
        agg, out = self.agg, {}
        names = set(agg.checked) | {c for g, c in agg.appeals if g == "code"}
        for code in sorted(names):
            failed = agg.groups["code"].get(code, [0, 0, 0])
            checked, blocked = agg.checked.get(code, 0), failed[REJECTED] + failed[FALLBACK]
            out[code] = {
                "checked": checked,
                "failed": sum(failed),
                "fail_rate": _rate(sum(failed), checked),
                **dict(zip(DECISIONS, failed, strict=True)),
                "blocked": blocked,
                "appeals": appeals_json(agg.appeals.get(("code", code)), blocked),
            }
        return out

    def _shadow(self) -> dict[str, Any]:
        """What the checks in shadow mode would have decided: the decisions and the per-check
        figures as enforcing them would have made them (equal to the real ones when nothing
        ran in shadow)."""
        agg, shadow = self.agg, self.agg.shadow
        by_code = {}
        for code in sorted(set(agg.groups["code"]) | set(shadow.code_moved)):
            real = agg.groups["code"].get(code, [0, 0, 0])
            would = _plus(real, shadow.code_moved.get(code, [0, 0, 0]))
            if sum(would):
                by_code[code] = {
                    "failed": sum(would),
                    **dict(zip(DECISIONS, would, strict=True)),
                    "blocked": would[REJECTED] + would[FALLBACK],
                }
        return {
            "verifications": shadow.verifications,
            "would_have": counts_json(_plus(agg.totals, shadow.moved)),
            "changed": dict(sorted(shadow.changed.items())),
            "codes": dict(sorted(shadow.codes.items())),
            "by_code": by_code,
        }

    def _by_day(self) -> list[dict[str, Any]]:
        days = zip(self.agg.window.days(), self.agg.day_tallies, strict=True)
        return [{"date": d.isoformat(), **counts_json(tally)} for d, tally in days]

    def _top_reasons(self) -> list[dict[str, Any]]:
        agg = self.agg
        ranked = sorted(agg.reject_codes.items(), key=lambda kv: (-kv[1], kv[0]))
        return [
            {"code": code, "count": n, "example": agg.reject_examples.get(code, "")}
            for code, n in ranked[:TOP_REASONS]
        ]


_LATENCY_METHOD = "log-bucket histogram (1% buckets, nearest rank, relative error < 0.5%)"
