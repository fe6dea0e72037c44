"""Stats over the verification log: exact figures, time windows, damaged logs, streaming."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.config import Config, load_config
from lingyi.log import (
    VerificationLog,
    file_appeal,
    resolve_appeal,
    verify_chain,
)
from lingyi.log.chain import EDITED
from lingyi.stats import (
    STATS_SCHEMA,
    LatencyHistogram,
    WindowError,
    compute_stats,
    days_window,
    last_full_week,
    parse_week,
    resolve_zone,
    stats_for,
    week_window,
    window_from_args,
)

UTC_ZONE = ZoneInfo("UTC")
SHANGHAI = ZoneInfo("Asia/Shanghai")
LOS_ANGELES = ZoneInfo("America/Los_Angeles")
BERLIN = ZoneInfo("Europe/Berlin")

# --------------------------------------------------------------------------- helpers


def vrec(
    ts: str,
    member: str = "lingzhi",
    decision: str = "approved",
    failed: tuple[tuple[str, str], ...] = (),
    latency: float = 10.0,
    kind: str = "fact",
    tool: str | None = "search_knowledge",
    session: str = "s1",
    content: str = "灵知知识库中有关于气功的文章",
) -> dict[str, Any]:
    """A verification record as the server writes it; ``failed`` = ((code, on_fail), …)."""
    checks: list[dict[str, Any]] = [
        {"stage": "pre_check", "code": "member.known", "passed": True, "on_fail": "reject",
         "reason": "known member", "degraded": False},
    ]  # fmt: skip
    for code, on_fail in failed:
        checks.append(
            {"stage": "boundary", "code": code, "passed": False, "on_fail": on_fail,
             "reason": f"{code} failed", "degraded": False}
        )  # fmt: skip
    return {
        "kind": "verification",
        "ts": ts,
        "session": session,
        "member": member,
        "type": kind,
        "content": content,
        "tool_call": {"name": tool, "arguments": {"query": "气功"}} if tool else None,
        "evidence_ids": [],
        "assertion_id": None,
        "decision": decision,
        "reason": "all checks passed" if decision == "approved" else "blocked",
        "recommendation": None,
        "fallback": None,
        "checks": checks,
        "latency_ms": latency,
        "policy_version": "test",
        "source": "server",
    }


def write_log(path: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append ``records`` through the real VerificationLog and return what was written."""
    with VerificationLog(path) as vlog:
        return [vlog.append(r) for r in records]


def write_config(tmp_path: Path, timezone: str = "UTC", language: str = "en") -> Path:
    cfg = tmp_path / "lingyi.toml"
    cfg.write_text(
        f'language = "{language}"\ntimezone = "{timezone}"\n[paths]\nlog = "log.jsonl"\n',
        encoding="utf-8",
    )
    return cfg


def config_for(tmp_path: Path, timezone: str = "UTC", language: str = "en") -> Config:
    return load_config(write_config(tmp_path, timezone, language), log=tmp_path / "log.jsonl")


def run_lingyi(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The real ``lingyi`` command (``python -m lingyi``), as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    return subprocess.run(
        [sys.executable, "-m", "lingyi", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "NO_COLOR": "1"},
    )


def week_stats(path: Path, week: str, zone: Any = UTC_ZONE, **kw: Any) -> dict[str, Any]:
    return compute_stats(path, week_window(week, zone), **kw)


# The W48 (2026-11-23 .. 2026-11-29, UTC) log whose figures the tests below assert.
R1 = vrec("2026-11-23T10:00:00.000Z", "lingzhi", latency=10)
R2 = vrec("2026-11-23T11:00:00.000Z", "lingzhi", "rejected", (("boundary.medical", "reject"),), 20)
R3 = vrec(
    "2026-11-24T09:00:00.000Z", "lingyi", "rejected", (("communication.on_record", "reject"),),
    30, kind="communication", tool=None,
)  # fmt: skip
R4 = vrec(
    "2026-11-25T09:00:00.000Z", "lingyi", "fallback", (("inference.labelled", "fallback"),),
    40, tool=None,
)  # fmt: skip
R5 = vrec(
    "2026-11-26T09:00:00.000Z", "lingflow", "rejected",
    (("boundary.medical", "reject"), ("domain.scope", "fallback")), 50, kind="action",
    tool="git_push",
)  # fmt: skip
R6 = vrec(
    "2026-11-29T23:59:59.999Z", "lingflow", "approved", (("inference.labelled", "warn"),),
    60, kind="action", tool="git_log",
)  # fmt: skip
R_AFTER = vrec("2026-11-30T00:00:00.000Z", "lingzhi", "rejected", (("boundary.medical", "reject"),))
R_BEFORE = vrec("2026-11-22T23:59:59.999Z", "lingzhi", "rejected", (("domain.scope", "reject"),))
WEEK = [R_BEFORE, R1, R2, R3, R4, R5, R6, R_AFTER]


@pytest.fixture
def week_log(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path / "log.jsonl"
    return path, write_log(path, WEEK)


# --------------------------------------------------------------------------- figures


def test_totals_and_rates_are_exact(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Totals count only the window's verifications; rates are decision / total."""
    s = week_stats(week_log[0], "2026-W48")
    assert s["schema"] == STATS_SCHEMA
    assert s["totals"] == {
        "total": 6, "approved": 2, "rejected": 3, "fallback": 1, "blocked": 4,
        "approved_rate": 0.333333, "rejected_rate": 0.5, "fallback_rate": 0.166667,
        "blocked_rate": 0.666667,
    }  # fmt: skip


def test_breakdowns_per_member_type_tool(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Per member, per assertion type and per tool counts; records without a tool have none."""
    s = week_stats(week_log[0], "2026-W48")

    def abbrev(group: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
        return {k: (v["approved"], v["rejected"], v["fallback"]) for k, v in group.items()}

    assert abbrev(s["by_member"]) == {
        "lingflow": (1, 1, 0), "lingyi": (0, 1, 1), "lingzhi": (1, 1, 0)
    }  # fmt: skip
    assert abbrev(s["by_type"]) == {
        "action": (1, 1, 0),
        "communication": (0, 1, 0),
        "fact": (1, 1, 1),
    }
    assert abbrev(s["by_tool"]) == {"git_log": (1, 0, 0), "git_push": (0, 1, 0),
                                    "search_knowledge": (1, 1, 0)}  # fmt: skip
    assert s["by_member"]["lingyi"]["blocked_rate"] == 1.0


def test_per_code_figures(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Per check code: how often it ran, failed, and the decision of the failing records."""
    codes = week_stats(week_log[0], "2026-W48")["by_code"]
    assert codes["member.known"]["checked"] == 6 and codes["member.known"]["failed"] == 0
    medical = codes["boundary.medical"]
    assert (medical["checked"], medical["failed"], medical["rejected"]) == (2, 2, 2)
    inference = codes["inference.labelled"]
    assert (inference["fallback"], inference["approved"], inference["blocked"]) == (1, 1, 1)
    assert inference["fail_rate"] == 1.0
    assert codes["domain.scope"]["rejected"] == 1


def test_intercepts_follow_the_table(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Intercepted = non-approved with a failed mapped code, once per verification.

    R5 fails boundary.medical and domain.scope but is one boundary violation; R6 fails
    inference.labelled as a warning but was approved, so it was not intercepted.
    """
    s = week_stats(week_log[0], "2026-W48")
    assert s["intercepted"] == {
        "fabricated_communications": 1, "boundary_violations": 2, "unlabelled_inferences": 1,
        "unsupported_conclusions": 0,
    }  # fmt: skip


def test_top_rejection_reasons_by_code(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Rejections are attributed to their failing reject checks, most frequent first."""
    reasons = week_stats(week_log[0], "2026-W48")["top_rejection_reasons"]
    assert [(r["code"], r["count"]) for r in reasons] == [
        ("boundary.medical", 2), ("communication.on_record", 1),
    ]  # fmt: skip
    assert reasons[0]["example"] == "boundary.medical failed"


def test_latency_percentiles(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Nearest-rank p50/p95/p99 of 10..60 ms, within the histogram's 0.5%."""
    lat = week_stats(week_log[0], "2026-W48")["latency_ms"]
    assert lat["count"] == 6 and lat["mean"] == 35.0 and lat["max"] == 60.0
    assert lat["p50"] == pytest.approx(30, rel=0.005)
    assert lat["p95"] == pytest.approx(60, rel=0.005)
    assert lat["p99"] == pytest.approx(60, rel=0.005)


def test_latency_histogram_error_is_below_half_a_percent() -> None:
    """Over 10,000 values spanning five decades every percentile is within 0.5%."""
    values = [0.01 * 1.0017**i for i in range(10_000)]
    hist = LatencyHistogram()
    for v in values:
        hist.add(v)
    for q in (0.5, 0.9, 0.95, 0.99, 0.999):
        exact = values[max(1, -(-int(q * 10_000 * 1000) // 1000)) - 1]
        assert hist.quantile(q) == pytest.approx(exact, rel=0.005)
    assert len(hist.buckets) < 2900


def test_by_day_in_local_days(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """by_day lists every day of the window, empty days included."""
    days = week_stats(week_log[0], "2026-W48")["by_day"]
    assert [d["date"] for d in days] == [f"2026-11-{d}" for d in range(23, 30)]
    assert [d["total"] for d in days] == [2, 1, 1, 1, 0, 0, 1]
    assert (days[0]["approved"], days[0]["rejected"]) == (1, 1)


def test_member_filter(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """--member keeps only that member's verifications."""
    s = week_stats(week_log[0], "2026-W48", member="lingyi")
    assert s["totals"]["total"] == 2 and list(s["by_member"]) == ["lingyi"]
    assert s["intercepted"]["fabricated_communications"] == 1


def test_empty_or_missing_log_gives_zero_figures(tmp_path: Path) -> None:
    """No log yet: zeros and null rates, not an error."""
    s = week_stats(tmp_path / "none.jsonl", "2026-W48")
    assert s["totals"]["total"] == 0 and s["totals"]["approved_rate"] is None
    assert s["latency_ms"]["p50"] is None and s["integrity"]["ok"]


# --------------------------------------------------------------------------- appeals


def test_appeals_give_overturn_and_false_positive_rates(
    week_log: tuple[Path, list[dict[str, Any]]],
) -> None:
    """Appeals are counted with the verification they concern (its time window).

    R2 (lingzhi, boundary.medical) overturned; R5 (lingflow, boundary.medical +
    domain.scope) upheld; R3 (lingyi) still open; R_AFTER (next week) overturned but
    outside the window. The false-positive rate is overturned / blocked.
    """
    path, written = week_log
    by_id = {r["id"]: r for r in written}
    ids = list(by_id)
    r2, r3, r5, r_after = ids[2], ids[3], ids[5], ids[7]
    file_appeal(path, r2, "the question was about fault diagnosis", by="alice")
    resolve_appeal(path, r2, "overturned", "not medical", by="bob")
    appeal5 = file_appeal(path, r5, "push was fine", by="alice")
    resolve_appeal(path, appeal5["id"], "upheld", "outside the roots", by="bob")
    file_appeal(path, r3, "LingFlow did say so", by="carol")
    file_appeal(path, r_after, "next week", by="carol")
    resolve_appeal(path, r_after, "overturned", "fine", by="bob")
    s = week_stats(path, "2026-W48")
    assert s["appeals"] == {
        "filed": 3, "open": 1, "upheld": 1, "overturned": 1, "overturned_approvals": 0,
        "overturn_rate": 0.5, "false_positive_rate": 0.25, "resolved": 2,
        "resolved_blocks": 2, "measured_fp_rate": None, "measured_fp_min": 5,
    }  # fmt: skip
    members = s["by_member"]
    assert members["lingzhi"]["appeals"]["false_positive_rate"] == 1.0
    assert members["lingflow"]["appeals"]["upheld"] == 1
    assert members["lingflow"]["appeals"]["false_positive_rate"] == 0.0
    assert members["lingyi"]["appeals"]["open"] == 1
    medical = s["by_code"]["boundary.medical"]["appeals"]
    assert (medical["filed"], medical["overturned"], medical["false_positive_rate"]) == (2, 1, 0.5)
    assert s["by_code"]["domain.scope"]["appeals"]["upheld"] == 1
    assert week_stats(path, "2026-W49")["appeals"]["overturned"] == 1
    assert s["integrity"]["ok"] and s["integrity"]["other_kinds"] == {}


def test_appeal_without_snapshot_is_looked_up(tmp_path: Path) -> None:
    """An appeal written by another tool without ``subject`` is still attributed."""
    path = tmp_path / "log.jsonl"
    written = write_log(path, [R2])
    vid = written[0]["id"]
    with VerificationLog(path) as vlog:
        appeal = vlog.append({"kind": "appeal", "appeal_of": vid, "reason": "r", "by": "x"})
        vlog.append(
            {"kind": "appeal_resolution", "appeal_of": vid, "appeal_id": appeal["id"],
             "outcome": "overturned", "note": "n", "by": "y"}
        )  # fmt: skip
    s = week_stats(path, "2026-W48")
    assert s["by_member"]["lingzhi"]["appeals"]["overturned"] == 1
    assert s["by_code"]["boundary.medical"]["appeals"]["false_positive_rate"] == 1.0


# --------------------------------------------------------------------------- time windows


TZ_CASES = [
    # ts, then the ISO week it falls in for UTC, Asia/Shanghai, America/Los_Angeles
    ("2026-11-22T16:30:00.000Z", "2026-W47", "2026-W48", "2026-W47"),  # Mon 00:30 in Shanghai
    ("2026-11-29T16:30:00.000Z", "2026-W48", "2026-W49", "2026-W48"),  # Mon 00:30 in Shanghai
    ("2026-11-30T07:30:00.000Z", "2026-W49", "2026-W49", "2026-W48"),  # Sun 23:30 in LA
    ("2027-01-03T12:00:00.000Z", "2026-W53", "2026-W53", "2026-W53"),  # Sun of W53 everywhere
    ("2027-01-03T17:00:00.000Z", "2026-W53", "2027-W01", "2026-W53"),  # Mon 01:00 in Shanghai
    ("2026-12-27T20:00:00.000Z", "2026-W52", "2026-W53", "2026-W52"),  # Mon 04:00 in Shanghai
]


@pytest.mark.parametrize(("ts", "utc", "shanghai", "la"), TZ_CASES)
def test_week_windows_across_zones(
    tmp_path: Path, ts: str, utc: str, shanghai: str, la: str
) -> None:
    """A record counts in the ISO week of its local day in the chosen zone, and only there."""
    path = tmp_path / "log.jsonl"
    write_log(path, [vrec(ts)])
    for zone, week in ((UTC_ZONE, utc), (SHANGHAI, shanghai), (LOS_ANGELES, la)):
        assert week_stats(path, week, zone)["totals"]["total"] == 1, (zone, week)
        year, number = parse_week(week)
        before = f"{year}-W{number - 1:02d}" if number > 1 else "2026-W53"
        assert week_stats(path, before, zone)["totals"]["total"] == 0, (zone, before)


def test_week_window_bounds_and_iso_year() -> None:
    """W53 of 2026 runs Mon 2026-12-28 to Mon 2027-01-04; years without W53 refuse it."""
    window = week_window("2026-W53", SHANGHAI)
    assert window.start == datetime(2026, 12, 27, 16, tzinfo=UTC)
    assert window.end == datetime(2027, 1, 3, 16, tzinfo=UTC)
    assert [d.isoformat() for d in window.days()][::6] == ["2026-12-28", "2027-01-03"]
    for bad in ("2027-W53", "2025-W53", "2026-W54", "2026-W00", "W48", "2026-48"):
        with pytest.raises(WindowError):
            parse_week(bad)


def test_last_full_week_depends_on_zone() -> None:
    """Default week: the ISO week before today's, today being taken in the zone."""
    now = datetime(2027, 1, 4, 1, 0, tzinfo=UTC)  # Monday in UTC, still Sunday in LA
    assert last_full_week(UTC_ZONE, now) == "2026-W53"
    assert last_full_week(LOS_ANGELES, now) == "2026-W52"
    assert last_full_week(SHANGHAI, datetime(2026, 12, 1, tzinfo=UTC)) == "2026-W48"


def test_week_across_dst_change_has_its_extra_hour(tmp_path: Path) -> None:
    """Berlin's W43 of 2026 ends the day clocks go back: 7 days and 1 hour long."""
    window = week_window("2026-W43", BERLIN)
    assert window.end - window.start == timedelta(days=7, hours=1)
    path = tmp_path / "log.jsonl"
    write_log(path, [vrec("2026-10-25T22:30:00.000Z")])  # Sunday 23:30 CET
    days = compute_stats(path, window)["by_day"]
    assert len(days) == 7 and days[-1] == {**days[-1], "date": "2026-10-25", "total": 1}


def test_days_window_uses_local_calendar_days(tmp_path: Path) -> None:
    """--days 1 is today in the zone: from local midnight to the next local midnight."""
    now = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)  # 09:00 on 11-30 in Shanghai
    window = days_window(1, SHANGHAI, now)
    assert (window.start, window.end) == (
        datetime(2026, 11, 29, 16, tzinfo=UTC), datetime(2026, 11, 30, 16, tzinfo=UTC),
    )  # fmt: skip
    assert days_window(1, UTC_ZONE, now).start == datetime(2026, 11, 30, tzinfo=UTC)
    assert len(days_window(7, LOS_ANGELES, now).days()) == 7


def test_window_arguments_and_zone_errors() -> None:
    """--since/--until are local dates (until included); bad input is a clear WindowError."""
    window = window_from_args(SHANGHAI, since="2026-11-23", until="2026-11-29")
    assert window.start == datetime(2026, 11, 22, 16, tzinfo=UTC)
    assert window.end == datetime(2026, 11, 29, 16, tzinfo=UTC)
    with pytest.raises(WindowError):
        window_from_args(SHANGHAI, days=3, since="2026-11-23")
    with pytest.raises(WindowError):
        window_from_args(SHANGHAI, since="2026-11-30", until="2026-11-23")
    with pytest.raises(WindowError, match="time zone"):
        resolve_zone("Mars/Olympus")
    with pytest.raises(WindowError, match="--until needs --since"):
        window_from_args(SHANGHAI, until="2026-11-29")
    with pytest.raises(WindowError):
        days_window(0, UTC_ZONE)


def test_zone_order_flag_then_config_then_machine(tmp_path: Path, monkeypatch: Any) -> None:
    """--tz wins over config ``timezone``, which wins over the machine's zone ($TZ)."""
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    config = config_for(tmp_path, timezone="Asia/Shanghai")
    assert str(resolve_zone("Europe/Berlin", config)) == "Europe/Berlin"
    assert str(resolve_zone(None, config)) == "Asia/Shanghai"
    assert str(resolve_zone(None, config_for(tmp_path, timezone=""))) == "America/Los_Angeles"


# --------------------------------------------------------------------------- damaged logs


def test_torn_last_line_is_counted_not_fatal(tmp_path: Path) -> None:
    """A torn last line is reported as unreadable; the records before and after count."""
    path = tmp_path / "log.jsonl"
    write_log(path, [R1, R2])
    with path.open("ab") as handle:
        handle.write(b'{"kind":"verification","decision":"appr')
    s = week_stats(path, "2026-W48")
    assert s["totals"]["total"] == 2
    assert s["integrity"]["unreadable"] == 1 and not s["integrity"]["ok"]
    assert "torn" in s["integrity"]["examples"][0]["problem"]
    write_log(path, [R3])  # the writer isolates the torn line and links to R2
    s = week_stats(path, "2026-W48")
    assert (s["totals"]["total"], s["integrity"]["unreadable"], s["integrity"]["chain_breaks"]) == (
        3, 1, 0,
    )  # fmt: skip


def test_older_schema_records_are_not_counted(tmp_path: Path) -> None:
    """A v0 record (no v, no kind, no hash) authenticates nothing: before the chain it is
    reported as older than it (not a break), after a hashed record it is a break (a copy
    with its hash stripped); in neither place is it in the figures."""
    old = {
        "ts": "2026-11-24T10:00:00+00:00", "member": "lingzhi", "type": "fact",
        "decision": "rejected", "reason": "old", "latency_ms": 5,
        "checks": [{"code": "boundary.medical", "passed": False}],
    }  # fmt: skip
    for before_chain in (True, False):
        path = tmp_path / f"log-{before_chain}.jsonl"
        if before_chain:
            path.write_text(json.dumps(old) + "\n", encoding="utf-8")
        write_log(path, [R1])
        with path.open("a", encoding="utf-8") as handle:
            handle.write("" if before_chain else json.dumps(old) + "\n")
        write_log(path, [R3])
        s = week_stats(path, "2026-W48")
        assert s["totals"]["total"] == 2 and s["totals"]["rejected"] == 1
        assert s["integrity"]["schema_versions"] == {"1": 2}
        assert s["integrity"]["unhashed"] == int(before_chain)
        assert s["integrity"]["chain_breaks"] == int(not before_chain)
        assert s["integrity"]["stripped"] == int(not before_chain)
        assert "boundary.medical" not in s["by_code"]


def test_unknown_schema_and_invalid_records_are_reported(tmp_path: Path) -> None:
    """A future schema version and a verification without a decision are flagged."""
    path = tmp_path / "log.jsonl"
    write_log(path, [{**R1, "v": 99}, {**R2, "decision": "maybe"}, {**R3, "ts": "yesterday"}])
    s = week_stats(path, "2026-W48")
    i = s["integrity"]
    assert (i["unknown_schema"], i["invalid"], i["ok"]) == (1, 2, False)
    assert s["totals"]["total"] == 1  # the v99 record still has a usable shape
    problems = [e["problem"] for e in i["examples"]]
    assert problems == ["unknown schema version 99", "no valid decision", "bad ts 'yesterday'"]


def _rewrite_line(path: Path, index: int, change: dict[str, Any]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[index])
    lines[index] = json.dumps({**record, **change}, ensure_ascii=False) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def test_edited_record_is_left_out_and_reported(tmp_path: Path) -> None:
    """An edited record is in no figure (its hash does not authenticate it) and is
    reported as a chain break."""
    path = tmp_path / "log.jsonl"
    written = write_log(path, [R1, R2, R3])
    _rewrite_line(path, 1, {"decision": "approved"})
    s = week_stats(path, "2026-W48")
    assert (s["totals"]["approved"], s["totals"]["rejected"]) == (1, 1)
    i = s["integrity"]
    assert (i["edited"], i["chain_breaks"], i["relinked"], i["ok"]) == (1, 1, 0, False)
    assert i["examples"] == [{"line": 2, "id": written[1]["id"], "problem": EDITED}]
    assert verify_chain(path).breaks[0].lineno == 2


def test_deleted_record_breaks_the_link(tmp_path: Path) -> None:
    """Deleting a record shows as a prev mismatch on the record after it."""
    path = tmp_path / "log.jsonl"
    written = write_log(path, [R1, R2, R3])
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text(lines[0] + lines[2], encoding="utf-8")
    i = week_stats(path, "2026-W48")["integrity"]
    assert (i["relinked"], i["edited"]) == (1, 0)
    assert i["examples"][0]["id"] == written[2]["id"]


def test_nested_lookalike_keys_are_parsed_not_guessed(tmp_path: Path) -> None:
    """Tool arguments with "prev"/"ts"/"kind" keys are parsed properly, not guessed."""
    path = tmp_path / "log.jsonl"
    tricky = vrec("2026-11-23T10:00:00.000Z")
    tricky["tool_call"]["arguments"] = {"prev": "0" * 64, "ts": "2020-01-01T00:00:00.000Z",
                                        "kind": "appeal"}  # fmt: skip
    write_log(path, [tricky, R2])
    s = week_stats(path, "2026-W48")
    assert s["totals"]["total"] == 2 and s["integrity"]["ok"]
    assert week_stats(path, "2020-W01")["totals"]["total"] == 0


# --------------------------------------------------------------------------- streaming


def test_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    """Peak memory of a pass over 20,000 records is about that of 2,000 records."""
    peaks = []
    for count in (2_000, 20_000):
        path = tmp_path / f"log-{count}.jsonl"
        write_log(
            path, [vrec(f"2026-11-2{3 + i % 7}T10:00:00.000Z", latency=i) for i in range(count)]
        )
        tracemalloc.start()
        compute_stats(path, week_window("2026-W48", UTC_ZONE))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] * 1.5 + 64_000, peaks


# --------------------------------------------------------------------------- entry points


def test_stats_for_is_the_cli_json(tmp_path: Path) -> None:
    """stats_for (MCP) and `lingyi stats --days 7 --json` return the same figures."""
    config = config_for(tmp_path)
    now = datetime.now(UTC) - timedelta(minutes=5)
    recent = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    write_log(config.log_path, [vrec(recent), vrec(recent, decision="rejected")])
    direct = stats_for(config, days=7)
    done = run_lingyi("--config", tmp_path / "lingyi.toml", "--log", config.log_path,
                      "stats", "--days", "7", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    direct.pop("generated_at"), printed.pop("generated_at")
    assert printed == direct and direct["totals"]["total"] == 2
    assert set(direct) == {
        "schema", "window", "member", "totals", "by_member", "by_type", "by_tool", "by_code",
        "by_day", "intercepted", "latency_ms", "top_rejection_reasons", "appeals", "judge",
        "approvals", "integrity", "log", "unknown_members", "previous", "change",
        "largest_changes", "shadow", "outcomes",
    }  # fmt: skip


def test_cli_stats_text_and_errors(week_log: tuple[Path, list[dict[str, Any]]]) -> None:
    """The human summary shows the figures; a bad window is an error with exit code 2."""
    path = week_log[0]
    base = ["--config", write_config(path.parent), "--log", path, "stats"]
    done = run_lingyi(*base, "--since", "2026-11-23", "--until", "2026-11-29", "--tz", "UTC")
    assert done.returncode == 0, done.stderr
    assert "Verifications 6: approved 2 (33.3%) · rejected 3 (50.0%)" in done.stdout
    assert "fabricated communications 1" in done.stdout and "boundary.medical" in done.stdout
    bad = run_lingyi(*base, "--days", "7", "--since", "2026-11-01")
    assert bad.returncode == 2 and "use --days or --since/--until" in bad.stderr
