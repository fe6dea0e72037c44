"""The weekly review: the week before beside every figure, appeals to decide, false positives
measured by appeals, reproducible examples, unknown members apart, policy versions, the
empty-week hint, and the page checked in headless Chromium by its sections.

Every log here is written by the real writer (:class:`lingyi.log.VerificationLog`) across
two weeks or more, in zones whose weeks start at other UTC instants.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.log import file_appeal, resolve_appeal
from lingyi.report import render_html, render_markdown, weekly_stats, write_weekly
from lingyi.stats import (
    compute_stats,
    days_window,
    previous_window,
    range_window,
    week_window,
)
from lingyi.stats.view import MIN_RESOLVED_APPEALS
from tests.test_report import _chromium_args, _need_chromium
from tests.test_stats import config_for, run_lingyi, vrec, write_config, write_log

SHANGHAI = ZoneInfo("Asia/Shanghai")
LOS_ANGELES = ZoneInfo("America/Los_Angeles")
MEDICAL = (("boundary.medical", "reject"),)
ON_RECORD = (("communication.on_record", "reject"),)
UNKNOWN = (("member.known", "reject"),)


def rejected(ts: str, member: str = "lingzhi", failed: Any = MEDICAL, **kw: Any) -> dict[str, Any]:
    return vrec(ts, member, "rejected", failed, **kw)


# --------------------------------------------------------------------------- the period before


@pytest.mark.parametrize(
    ("window", "label", "start", "end"),
    [
        (week_window("2026-W48", SHANGHAI), "2026-W47",
         "2026-11-15T16:00:00+00:00", "2026-11-22T16:00:00+00:00"),
        (week_window("2027-W01", ZoneInfo("UTC")), "2026-W53",  # a 53-week ISO year
         "2026-12-28T00:00:00+00:00", "2027-01-04T00:00:00+00:00"),
        (week_window("2026-W45", LOS_ANGELES), "2026-W44",  # the week before holds the DST end
         "2026-10-26T07:00:00+00:00", "2026-11-02T08:00:00+00:00"),
        (days_window(3, SHANGHAI, datetime(2026, 11, 30, 2, tzinfo=UTC)), "2026-11-25 .. 2026-11-27",
         "2026-11-24T16:00:00+00:00", "2026-11-27T16:00:00+00:00"),
        (range_window("2026-11-23T12:00", "2026-11-24T12:00", SHANGHAI),
         "2026-11-22T04:00:00.000Z .. 2026-11-23T04:00:00.000Z",
         "2026-11-22T04:00:00+00:00", "2026-11-23T04:00:00+00:00"),
    ],
)  # fmt: skip
def test_previous_window(window: Any, label: str, start: str, end: str) -> None:
    """The period before a week is the ISO week before (53-week years and DST changes
    included); before whole local days, as many days; otherwise the same length of time."""
    before = previous_window(window)
    assert (before.label, before.start.isoformat(), before.end.isoformat()) == (label, start, end)


def _two_weeks(path: Path) -> list[dict[str, Any]]:
    """W47 and W48 in Shanghai: lingzhi's medical rejections rise from 1 to 4, lingyi's
    fabricated communications fall from 2 to 0; the edges of each week are local midnights."""
    return write_log(path, [
        rejected("2026-11-15T16:00:00.000Z"),                           # W47 Mon 00:00 local
        rejected("2026-11-16T09:00:00.000Z", "lingyi", ON_RECORD),
        rejected("2026-11-22T15:59:59.999Z", "lingyi", ON_RECORD),      # W47 Sun 23:59 local
        vrec("2026-11-20T09:00:00.000Z", "lingflow"),
        rejected("2026-11-22T16:00:00.000Z"),                           # W48 Mon 00:00 local
        rejected("2026-11-24T09:00:00.000Z"),
        rejected("2026-11-25T09:00:00.000Z"),
        rejected("2026-11-29T15:59:59.999Z"),                           # W48 Sun 23:59 local
        vrec("2026-11-26T09:00:00.000Z", "lingyi"),
        vrec("2026-11-26T10:00:00.000Z", "lingflow"),
        rejected("2026-11-29T16:00:00.000Z"),                           # W49: in neither
    ])  # fmt: skip


@pytest.mark.parametrize("rebuild", [True, False])
def test_week_over_week_deltas(tmp_path: Path, rebuild: bool) -> None:
    """Every figure has the week before and the change; the largest member × check changes
    come first, in both directions; an index rebuilt (--full) and one read back agree."""
    path = tmp_path / "log.jsonl"
    _two_weeks(path)
    compute_stats(path, week_window("2026-W48", SHANGHAI))
    s = compute_stats(path, week_window("2026-W48", SHANGHAI), rebuild=rebuild)
    assert s["previous"]["window"]["label"] == "2026-W47"
    assert (s["totals"]["total"], s["previous"]["totals"]["total"]) == (6, 4)
    assert s["change"]["totals"]["total"] == 2 and s["change"]["totals"]["rejected"] == 1
    assert s["change"]["totals"]["blocked_rate"] == round(4 / 6 - 3 / 4, 6)
    assert s["change"]["intercepted"] == {
        "boundary_violations": 3, "fabricated_communications": -2, "unlabelled_inferences": 0,
        "unsupported_conclusions": 0,
    }  # fmt: skip
    assert s["change"]["by_member"]["lingzhi"]["by_code"]["boundary.medical"]["failed"] == 3
    assert "method" not in s["change"]["latency_ms"]  # texts have no change
    changes = [(c["member"], c["code"], c["previous"], c["failed"]) for c in s["largest_changes"]]
    assert changes == [
        ("lingzhi", "boundary.medical", 1, 4), ("lingyi", "communication.on_record", 2, 0),
    ]  # fmt: skip


def test_an_index_read_back_and_one_rebuilt_give_the_same_comparison(tmp_path: Path) -> None:
    """The week before is counted the same way from the index read back and rebuilt."""
    path = tmp_path / "log.jsonl"
    _two_weeks(path)
    window = week_window("2026-W48", SHANGHAI)
    a, b = compute_stats(path, window), compute_stats(path, window, rebuild=True)
    a.pop("generated_at"), b.pop("generated_at")
    assert a == b


def test_a_week_with_no_week_before(tmp_path: Path) -> None:
    """A first week: the week before is all zeros, counts change by themselves, rates and
    latencies have no change (null), and the Markdown says so in plain words."""
    config = config_for(tmp_path, timezone="Asia/Shanghai")
    write_log(config.log_path, [rejected("2026-11-24T09:00:00.000Z")])
    s = weekly_stats(config, "2026-W48")
    assert s["change"]["totals"]["total"] == 1 and s["change"]["totals"]["blocked_rate"] is None
    assert s["change"]["latency_ms"]["p95"] is None
    md = render_markdown(s, "en")
    assert "- lingzhi · boundary.medical: 0 → 1 failures (+1 since the week before)" in md
    assert "1 verifications this week; 0 in 2026-W47." in md


# --------------------------------------------------------------------------- appeals


def test_open_appeals_listed_with_what_to_decide(tmp_path: Path) -> None:
    """Open appeals, whenever filed and whichever week their verification is in, are listed
    oldest first with member, redacted content, codes, reason, age and the command; resolved
    ones are not."""
    config = config_for(tmp_path, timezone="Asia/Shanghai")
    key = "sk-ant-api03-" + "x" * 90
    written = write_log(config.log_path, [
        rejected("2026-11-10T09:00:00.000Z", "lingyi", ON_RECORD, content=f"灵通说审计完成 {key}"),
        rejected("2026-11-24T09:00:00.000Z"), rejected("2026-11-25T09:00:00.000Z"),
    ])  # fmt: skip
    old = file_appeal(config.log_path, written[0]["id"], f"灵通确实说过 {key}", by="alice")
    file_appeal(config.log_path, written[1]["id"], "fault diagnosis", by="bob")
    resolve_appeal(config.log_path, written[1]["id"], "overturned", "yes", by="carol")
    review = weekly_stats(config, "2026-W48")["review"]
    assert review["open_appeals_total"] == 1
    (only,) = review["open_appeals"]
    assert (only["appeal_id"], only["member"], only["codes"]) == (
        old["id"], "lingyi", ["communication.on_record"],
    )  # fmt: skip
    assert key not in json.dumps(review) and "[REDACTED:anthropic_key:" in only["content"]
    assert only["reason"].startswith("灵通确实说过 [REDACTED:")
    assert only["command"] == f'lingyi appeal resolve {old["id"]} --uphold|--overturn --note "..."'
    assert only["age_days"] is not None and 0 <= only["age_days"] < 1


@pytest.mark.parametrize(
    ("overturned", "upheld", "upheld_approvals", "rate", "cell"),
    [
        (0, 0, 0, None, "no data (n=0 < 5)"),
        (1, 1, 0, None, "no data (n=2 < 5)"),
        (2, 3, 0, 0.4, "40.0% (2 of 5)"),
        (2, 3, 2, None, "no data (n=3 < 5)"),  # upheld approvals are not blocks
        (1, 5, 0, round(1 / 6, 6), "16.7% (1 of 6)"),
    ],
)  # fmt: skip
def test_false_positive_rate_over_resolved_appeals(
    tmp_path: Path, overturned: int, upheld: int, upheld_approvals: int, rate: Any, cell: str
) -> None:
    """The measured false-positive rate is overturned / resolved appeals of blocks, with its
    count, and no data below the minimum; the old lower bound (/ all blocks) stays beside it."""
    config = config_for(tmp_path)
    blocks = overturned + upheld - upheld_approvals + 2  # two blocks nobody appealed
    records = [rejected(f"2026-11-24T09:{i:02d}:00.000Z") for i in range(blocks)]
    records += [vrec(f"2026-11-25T09:{i:02d}:00.000Z") for i in range(upheld_approvals)]
    written = write_log(config.log_path, records)
    approvals = written[blocks:]
    outcomes = ["overturned"] * overturned + ["upheld"] * (upheld - upheld_approvals)
    for record, outcome in zip(written, outcomes, strict=False):
        file_appeal(config.log_path, record["id"], "too strict", by="a")
        resolve_appeal(config.log_path, record["id"], outcome, "n", by="b")
    for record in approvals:
        file_appeal(config.log_path, record["id"], "too lax", by="a")
        resolve_appeal(config.log_path, record["id"], "upheld", "n", by="b")
    s = weekly_stats(config, "2026-W48")
    appeals = s["appeals"]
    assert (appeals["measured_fp_rate"], appeals["measured_fp_min"]) == (rate, MIN_RESOLVED_APPEALS)
    assert appeals["false_positive_rate"] == round(overturned / blocks, 6)
    assert s["by_member"]["lingzhi"]["appeals"]["measured_fp_rate"] == rate
    resolved = overturned + upheld - upheld_approvals
    assert f"| Total |  | {overturned} | {resolved} | {cell} |" in render_markdown(s, "en")


# --------------------------------------------------------------------------- examples


def test_examples_are_sampled_reproducibly(tmp_path: Path) -> None:
    """A few rejections per top failing check, the same ones on every run and whatever is
    appended to other weeks; newest first; content redacted."""
    config = config_for(tmp_path)
    key = "sk-ant-api03-" + "y" * 90
    records = [rejected(f"2026-11-2{3 + i % 7}T0{i % 10}:00:00.000Z", content=f"第{i}条 {key}")
               for i in range(20)]  # fmt: skip
    write_log(config.log_path, records)
    first = weekly_stats(config, "2026-W48")["review"]["examples"]
    write_log(config.log_path, [rejected("2026-12-02T09:00:00.000Z")])  # next week
    again = weekly_stats(config, "2026-W48")["review"]["examples"]
    assert first == again and list(first) == ["boundary.medical"]
    shown = first["boundary.medical"]
    assert len(shown) == 3 and [e["ts"] for e in shown] == sorted(
        (e["ts"] for e in shown), reverse=True
    )
    assert all(key not in e["content"] and e["member"] == "lingzhi" and e["id"] for e in shown)
    assert all(e["reason"] == "boundary.medical failed" for e in shown)


# --------------------------------------------------------------------------- members


def test_unknown_members_are_grouped_apart(tmp_path: Path) -> None:
    """Members the guard did not know (member.known failed) are a security signal: listed
    apart, with the week before, and kept out of the member table, chart and drill-down."""
    config = config_for(tmp_path)
    write_log(config.log_path, [
        rejected("2026-11-24T09:00:00.000Z", "lingzhii", UNKNOWN),
        rejected("2026-11-25T09:00:00.000Z", "admin", UNKNOWN, content="<b>x</b>"),
        rejected("2026-11-17T09:00:00.000Z", "admin", UNKNOWN),
        rejected("2026-11-24T10:00:00.000Z"),
    ])  # fmt: skip
    s = weekly_stats(config, "2026-W48")
    assert set(s["unknown_members"]) == {"admin", "lingzhii"} and "lingzhi" in s["by_member"]
    assert s["previous"]["unknown_members"]["admin"]["total"] == 1
    md = render_markdown(s, "zh")
    unknown = md.split("## 未知成员（安全信号）")[1].split("\n## ")[0]
    assert "| admin | 1 | 1 | 1 |" in unknown and "| lingzhii | 1 | 1 | 0 |" in unknown
    members = md.split("## 按成员\n")[1].split("\n## ")[0]
    assert "lingzhii" not in members and "admin" not in members and "| lingzhi |" in members
    page = render_html(s, "zh")
    chart = page.split('id="per-member"')[1].split("</svg>")[0]
    assert "lingzhii" not in chart and "lingzhi" in chart


def test_drill_down_per_member_by_check(tmp_path: Path) -> None:
    """Per member, the checks that failed this week or the week before, with the verdicts
    they failed in and the change."""
    config = config_for(tmp_path)
    write_log(config.log_path, [
        rejected("2026-11-24T09:00:00.000Z"),
        vrec("2026-11-24T10:00:00.000Z", "lingzhi", "fallback", (("inference.labelled", "fallback"),)),
        rejected("2026-11-17T09:00:00.000Z", failed=ON_RECORD),
    ])  # fmt: skip
    md = render_markdown(weekly_stats(config, "2026-W48"), "en")
    drill = md.split("### lingzhi")[1]
    assert "| boundary.medical | 1 | 1 | 1 | 0 | 0 | 100.0% | 0 | +1 |" in drill
    assert "| inference.labelled | 1 | 1 | 0 | 1 | 0 | 100.0% | 0 | +1 |" in drill
    assert "| communication.on_record | 0 | 0 | 0 | 0 | 0 | – | 1 | −1 |" in drill
    assert "| member.known |" not in drill  # never failed: not listed


# --------------------------------------------------------------------------- what changed


def test_policy_version_changes(tmp_path: Path) -> None:
    """The policy versions that decided in the week, when each was first and last seen (local
    time), and which are new since the week before."""
    config = config_for(tmp_path, timezone="Asia/Shanghai")
    records = [vrec("2026-11-18T09:00:00.000Z"), vrec("2026-11-24T09:00:00.000Z"),
               vrec("2026-11-26T09:00:00.000Z"), vrec("2026-11-27T09:00:00.000Z")]  # fmt: skip
    for record, version in zip(records, ["p1", "p1", "p2", "p2"], strict=True):
        record["policy_version"] = version
    write_log(config.log_path, records)
    s = weekly_stats(config, "2026-W48")
    assert s["review"]["policy_versions"] == [
        {"version": "p1", "first": "2026-11-24T09:00:00.000Z", "last": "2026-11-24T09:00:00.000Z",
         "verifications": 1, "new": False},
        {"version": "p2", "first": "2026-11-26T09:00:00.000Z", "last": "2026-11-27T09:00:00.000Z",
         "verifications": 2, "new": True},
    ]  # fmt: skip
    md = render_markdown(s, "en")
    assert "| p2 | 2026-11-26 17:00 | 2026-11-27 17:00 | 2 | yes |" in md
    assert "The week before: p1." in md


def test_checks_gained_or_lost_since_the_week_before(tmp_path: Path) -> None:
    """What changed names the checks that ran this week and not the week before, and back."""
    config = config_for(tmp_path)
    before = vrec("2026-11-17T09:00:00.000Z")
    before["checks"].append({**before["checks"][0], "code": "domain.scope"})
    write_log(config.log_path, [before, rejected("2026-11-24T09:00:00.000Z")])
    md = render_markdown(weekly_stats(config, "2026-W48"), "en")
    assert "Checks that ran this week and not the week before: boundary.medical." in md
    assert "Checks that ran the week before and not this week: domain.scope." in md


def test_cli_stats_text_shows_the_period_before(tmp_path: Path) -> None:
    """`lingyi stats` (text) shows the period before, the largest changes, unknown members
    and the false-positive rate over resolved appeals."""
    path = tmp_path / "log.jsonl"
    _two_weeks(path)
    write_log(path, [rejected("2026-11-24T09:00:00.000Z", "lingzhii", UNKNOWN)])
    done = run_lingyi("--config", write_config(tmp_path, "Asia/Shanghai"), "--log", path,
                      "stats", "--since", "2026-11-23", "--until", "2026-11-29")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Previous period (2026-11-16 .. 2026-11-22): 4 verifications (change +3" in done.stdout
    assert "  lingzhi · boundary.medical: failed 1 → 4" in done.stdout
    assert "Unknown members (member.known failed): lingzhii (1)" in done.stdout
    assert "false-positive rate over resolved appeals no data, 0 < 5 resolved" in done.stdout


def test_judge_and_shadow_only_when_the_log_has_them(tmp_path: Path) -> None:
    """Without judge traces or shadow decisions there is no judge or shadow section (and
    nothing fails); with shadow decisions, what the shadow policy would have decided."""
    config = config_for(tmp_path)
    write_log(config.log_path, [rejected("2026-11-24T09:00:00.000Z")])
    plain = weekly_stats(config, "2026-W48")
    assert plain["review"]["shadow"] is None
    for page in (render_markdown(plain, "en"), render_html(plain, "en")):
        assert "Shadow policy" not in page and "Judge" not in page
    shadowed = vrec("2026-11-25T09:00:00.000Z")
    shadowed["shadow"] = {"decision": "rejected", "policy_version": "next"}
    write_log(config.log_path, [shadowed])
    s = weekly_stats(config, "2026-W48")
    assert s["review"]["shadow"] == {
        "verifications": 1, "would_have": {"rejected": 1}, "changed": {"approved→rejected": 1},
    }  # fmt: skip
    assert "| Decided differently (approved→rejected) | 1 |" in render_markdown(s, "en")


# --------------------------------------------------------------------------- the CLI


def test_report_says_the_week_and_suggests_the_current_one(tmp_path: Path) -> None:
    """`lingyi report` says which week it wrote and how many verifications; when that week is
    empty and the current one is not, it suggests the current week."""
    now = datetime.now(UTC) - timedelta(minutes=1)
    config = config_for(tmp_path)
    write_log(
        config.log_path, [vrec(now.isoformat(timespec="milliseconds").replace("+00:00", "Z"))]
    )
    args = ["--config", write_config(tmp_path), "--log", config.log_path, "report",
            "--out", tmp_path / "r", "--format", "md"]  # fmt: skip
    done = run_lingyi(*args)
    year, week, _ = now.isocalendar()
    current = f"{year}-W{week:02d}"
    assert done.returncode == 0, done.stderr
    assert "verifications" in done.stderr and f"lingyi report --week {current}" in done.stderr
    assert f"the current week {current} has 1 so far" in done.stderr
    full = run_lingyi(*args, "--week", current, "--json")
    result = json.loads(full.stdout)
    assert (result["week"], result["verifications"], result["current_week"]) == (current, 1, None)


def test_write_weekly_names_the_week(tmp_path: Path) -> None:
    """The Python API says what it wrote: the week and its verifications, counted in the zone
    (in UTC, the records at Shanghai's week edges move a week)."""
    for zone, days in (("Asia/Shanghai", [1, 1, 1, 2, 0, 0, 1]), ("UTC", [0, 1, 1, 2, 0, 0, 2])):
        (home := tmp_path / zone.replace("/", "-")).mkdir()
        config = config_for(home, timezone=zone)
        _two_weeks(config.log_path)
        done = write_weekly(config, "2026-W48", out=tmp_path / "r", formats=("md",))
        assert (done.week, done.verifications, done.current_week) == ("2026-W48", 6, None)
        assert [d["total"] for d in weekly_stats(config, "2026-W48")["by_day"]] == days


# --------------------------------------------------------------------------- the browser


SECTIONS = ("changes", "appeals", "summary", "false-positives", "unknown-members", "per-day",
            "top-codes", "examples", "per-member", "drill-down", "what-changed", "integrity")  # fmt: skip


@pytest.mark.parametrize(("lang", "words"), [("zh", ("待裁决的申诉", "未知成员")),
                                             ("en", ("Appeals to decide", "Unknown members"))])  # fmt: skip
def test_review_sections_render_in_headless_chromium(
    tmp_path: Path, lang: str, words: tuple[str, ...]
) -> None:
    """Chromium renders every section of the review, found by its id in the DOM, with the
    open appeal's command, an example's record id and the unknown member in their sections."""
    _need_chromium()
    config = config_for(tmp_path, timezone="Asia/Shanghai", language=lang)
    written = _two_weeks(config.log_path)
    write_log(config.log_path, [rejected("2026-11-25T09:00:00.000Z", "lingzhii", UNKNOWN)])
    appeal = file_appeal(config.log_path, written[5]["id"], "fault diagnosis", by="alice")
    done = write_weekly(config, "2026-W48", out=tmp_path / "r", formats=("html",))
    dom = subprocess.run(
        [*_chromium_args(tmp_path / "profile"), "--dump-dom", done.paths[0].as_uri()],
        check=True, capture_output=True, timeout=120,
    ).stdout.decode()  # fmt: skip
    parts = {s: dom.split(f'<section id="{s}">')[1].split("</section>")[0] for s in SECTIONS}
    assert f"lingyi appeal resolve {appeal['id']}" in parts["appeals"]
    assert written[5]["id"] in parts["examples"] or written[6]["id"] in parts["examples"]
    assert "lingzhii" in parts["unknown-members"] and "lingzhii" not in parts["per-member"]
    assert "boundary.medical" in parts["changes"] and parts["per-day"].count("<svg") == 1
    assert all(word in dom for word in words) and "<script" not in dom.lower()
