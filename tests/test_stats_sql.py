"""The window's counters computed by SQL over the index equal those counted record by record.

:meth:`Aggregator.from_index` (what ``lingyi stats`` runs: GROUP BY over the index's
``verifications`` and ``checks`` tables, bodies read only for flagged records and examples)
must give the very figures of :meth:`Aggregator.verification` fed every verification of the
window, on a log with every kind of record and the odd values a hand-written or older record
may hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.log import VerificationLog, canonical, file_appeal, resolve_appeal
from lingyi.log.records import ts_key
from lingyi.stats import Aggregator, StatsView, previous_window, week_window
from lingyi.store import Store, open_store

MEMBERS = ("lingyi", "lingzhi", "lingflow", "灵研", "lingx")  # lingx: no policy names it
TOOLS = ("search_knowledge", "git_push", "council_post", None, "")
CONTENT = (
    "灵通说v0.16审计已经完成",
    "The KB has an article on qigong",
    "基于数据趋势，下周一会上线",
)
FAILING = (
    ("boundary.medical", "reject", "医疗边界：不能检索用药建议"),
    ("communication.on_record", "reject", "LingFlow posted no such message"),
    ("inference.labelled", "fallback", "推演未标注【推演】"),
    ("domain.scope", "fallback", "outside the allowed domains"),
    ("evidence.cited_ids_exist", "warn", "cited id not in the ledger"),
    ("tool.path_allowed", None, "path outside the roots"),  # no on_fail: blocking
    ("conclusion.evidence", "reject", None),  # a reason that is not text
)
# What a latency may be in a record: numbers of every size, and what is not one.
LATENCIES: tuple[object, ...] = (12.5, 3, 0, 0.0004, -2.0, 1e15, None, "12", True, 7.25, 250)
START = datetime(2026, 11, 16, tzinfo=UTC)  # Monday of 2026-W47


def _check(code: object, passed: object, on_fail: object, reason: object) -> dict[str, Any]:
    return {"stage": "boundary", "code": code, "passed": passed, "on_fail": on_fail,
            "reason": reason, "degraded": False}  # fmt: skip


def _checks(rng: random.Random, decision: str) -> object:
    checks: list[Any] = [_check("member.known", True, "reject", "known")]
    for code, on_fail, reason in rng.sample(FAILING, rng.randint(0, 2)):
        checks.append(_check(code, False, on_fail, reason))
    extra = rng.random()
    if extra < 0.05:
        checks.append(_check(7, False, "reject", "a code that is a number"))
    elif extra < 0.08:
        checks.append({"passed": False, "on_fail": "reject"})  # no code at all
    elif extra < 0.1:
        checks.append("not a check")
    elif extra < 0.12:
        checks.append(_check("pre.non_empty", None, "reject", "passed is not a bool"))
    if decision == "rejected" and rng.random() < 0.05:
        return {"not": "a list"}
    return None if rng.random() < 0.02 else checks


def _flags(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rng.random() < 0.1:
        out["judge"] = {
            "outcome": rng.choice(("satisfied", "needs_revision")), "kind": "assertion",
            "called": rng.random() < 0.7, "cached": rng.random() < 0.3, "model": "m",
            "cost_usd": 0.002, "input_tokens": 120, "output_tokens": 30, "latency_ms": 800,
            "criteria": [{"criterion": "有证据支持", "passed": rng.random() < 0.5}],
        }  # fmt: skip
    if rng.random() < 0.1:
        shadow = rng.choice(("approved", "rejected", "fallback", "bogus"))
        out["shadow"] = {"decision": shadow, "codes": ["domain.scope"]}
    if rng.random() < 0.1:
        out["uncertain"] = ["communication.on_record"]
    return out


def _verification(rng: random.Random, i: int) -> dict[str, Any]:
    decision = rng.choice(("approved", "approved", "rejected", "fallback"))
    tool = rng.choice(TOOLS)
    call = None if tool is None else ({"arguments": {}} if tool == "" else {"name": tool})
    ts = START + timedelta(days=14) * rng.random()
    return {
        "kind": "verification", "ts": ts_key(ts), "session": f"s{i % 7}",
        "member": rng.choice(MEMBERS), "type": rng.choice(("fact", "communication", "action")),
        "content": rng.choice(CONTENT), "tool_call": call, "decision": decision,
        "reason": rng.choice(("blocked", "已拦截", None)), "checks": _checks(rng, decision),
        "latency_ms": rng.choice(LATENCIES), "policy_version": "test", **_flags(rng),
    }  # fmt: skip


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two weeks of every kind of record: verifications, appeals, approvals, outcomes."""
    rng = random.Random(23)
    path = tmp_path_factory.mktemp("sql") / "log.jsonl"
    records = [_verification(rng, i) for i in range(1500)]
    records.append({**records[0], "decision": "maybe"})  # no valid decision: in no window
    with VerificationLog(path) as vlog:
        written = [vlog.append(r) for r in records]
        for i, event in enumerate(("requested", "approved", "used")):
            vlog.append({"kind": "approval", "approval_id": "ap-1", "event": event,
                         "member": "lingflow", "ts": ts_key(START + timedelta(days=i))})  # fmt: skip
        vlog.append({"kind": "outcome", "member": "lingzhi", "tool": "git_push",
                     "status": "failed", "ts": ts_key(START + timedelta(days=9))})  # fmt: skip
    for record in written[:40:4]:
        file_appeal(path, record["id"], "误判：这是故障诊断", by="alice")
        resolve_appeal(path, record["id"], rng.choice(("upheld", "overturned")), "n", by="bob")
    return path


def _python(store: Store, agg: Aggregator) -> Aggregator:
    for _, record in store.verifications(agg.start_key, agg.end_key, agg.member):
        agg.verification(record)
    return agg


def _figures(agg: Aggregator) -> dict[str, Any]:
    out = StatsView(agg, {}).as_json()
    out.pop("generated_at")
    return out


@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai"])
@pytest.mark.parametrize("member", [None, "灵研", "lingx"])
def test_sql_counts_equal_python_counts(mixed_log: Path, zone: str, member: str | None) -> None:
    """Every counter (decisions, members, types, tools, codes per member, days, intercepts,
    latency histograms, rejection reasons and their examples, judge, shadow, uncertain) is
    the same by SQL as counted record by record, in a week and in the week before it."""
    week = week_window("2026-W48", ZoneInfo(zone))
    store = open_store(mixed_log)
    try:
        for window in (week, previous_window(week)):
            by_sql = Aggregator(window, member)
            by_sql.from_index(store)
            by_python = _python(store, Aggregator(window, member))
            assert _figures(by_sql) == _figures(by_python)
            assert by_sql.totals == by_python.totals and sum(by_sql.totals) > 0
    finally:
        store.close()


def test_the_log_holds_what_the_comparison_needs(mixed_log: Path) -> None:
    """The comparison above is not vacuous: the week holds judge, shadow and uncertain
    records, intercepts, odd latencies and both kinds of rejection reason."""
    store = open_store(mixed_log)
    try:
        agg = _python(store, Aggregator(week_window("2026-W48", ZoneInfo("UTC"))))
    finally:
        store.close()
    assert agg.judge.consulted and agg.shadow.changed and sum(agg.uncertain)
    assert all(agg.intercepted.values()) and agg.latency.zeros and agg.latency.low < 0
    assert "(no failed check)" in agg.reject_codes and "7" in agg.checked
    assert "None" in agg.checked and "None" in agg.groups["tool"]
    assert "conclusion.evidence" in agg.reject_codes
    assert "conclusion.evidence" not in agg.reject_examples


def test_an_index_of_the_old_layout_is_rebuilt(mixed_log: Path, tmp_path: Path) -> None:
    """An index made by version 1 (other columns, no ``ran``) is dropped and made again by
    the next reader, which then counts as a fresh index does."""
    week = week_window("2026-W48", ZoneInfo("UTC"))
    index = tmp_path / "old.index.sqlite"
    db = sqlite3.connect(index)
    db.executescript(
        "CREATE TABLE state (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT, seal TEXT);"
        "CREATE TABLE verifications (line INTEGER PRIMARY KEY, ts TEXT, member TEXT,"
        " decision TEXT, type TEXT, tool TEXT);"
        "CREATE TABLE checks (line INTEGER, code TEXT, passed INTEGER, on_fail TEXT);"
    )
    body = canonical({"keys": None, "version": 1})
    seal = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    db.execute("INSERT INTO state VALUES (1, ?, ?)", (body, seal))
    db.commit()
    db.close()
    old, fresh = open_store(mixed_log, path=index), open_store(mixed_log)
    try:
        counted = []
        for store in (old, fresh):
            agg = Aggregator(week)
            agg.from_index(store)
            counted.append(_figures(agg))
        assert counted[0] == counted[1] and counted[0]["totals"]["total"] > 0
    finally:
        old.close()
        fresh.close()
    with contextlib.closing(sqlite3.connect(index)) as db:  # rebuilt in the file, not in memory
        columns = {row[1] for row in db.execute("PRAGMA table_info(verifications)")}
        assert "ran" in columns and db.execute("SELECT COUNT(*) FROM checks").fetchone()[0]
