"""The judge on record: uncertain checks it settles, the log's ``judge`` field, a replay with
the judge unreachable, and the figures of stats and the weekly report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lingyi.cli import main
from lingyi.judge import Judge
from lingyi.log import read_log, verification_record
from lingyi.log.records import JudgeTrace, VerificationRecord
from lingyi.models import Assertion
from lingyi.policy import PolicySet
from lingyi.report import render_html, render_markdown
from lingyi.stats import compute_stats, days_window, resolve_zone, week_window
from tests import messages_api as api
from tests._evidence_world import check, verify, world_layer, world_ledger
from tests.conftest import ROOT, SHIPPED_POLICIES
from tests.judge_kit import FAKE_KEY, KEY_ENV, closed_port_url, judge_config, rig

UNSURE = "search-api 的 p95 延迟是 840 毫秒，根因是内存泄漏"  # subject_supported: uncertain
SUBJECT = "evidence.subject_supported"
EXAMPLES = sorted((ROOT / "examples").glob("*.jsonl"))


@pytest.fixture
def model() -> Iterator[tuple[api.FakeModel, str]]:
    with api.messages_api() as served:
        yield served


# --------------------------------------------------------------------------- uncertain


SETTLES = [
    # (reply, key, decision, the uncertain check passed, degraded)
    (lambda r: api.tool_use(r, api.verdict(r)), FAKE_KEY, "approved", True, False),
    (lambda r: api.tool_use(r, api.verdict(r, {"c1": "the traces show a timeout"})), FAKE_KEY, "rejected", False, False),
    (lambda r: api.tool_use(r, api.verdict(r)), "", "approved", True, True),  # no key: on_error
]  # fmt: skip


@pytest.mark.parametrize(("reply", "key", "decision", "passed", "degraded"), SETTLES)
def test_the_judge_settles_uncertain_checks(
    policies: PolicySet,
    model: tuple[api.FakeModel, str],
    reply: Any,
    key: str,
    decision: str,
    passed: bool,
    degraded: bool,
) -> None:
    """on_uncertain = "judge": the judge sees what the check found and its verdict settles
    the check; without a verdict of its own (no key) on_error does, recorded as degraded."""
    state, url = model
    state.script = reply
    layer = world_layer(policies)
    layer.judge = Judge(judge_config(url), api_key=key)
    result = verify(layer, world_ledger(), UNSURE)
    layer.judge.close()  # type: ignore[attr-defined]
    settled = check(result, SUBJECT)
    assert result.decision == decision and settled.uncertain
    assert (settled.passed, settled.degraded) == (passed, degraded)
    if key:
        undecided = api.data_of(state.requests[0])["undecided_checks"]
        assert [u["code"] for u in undecided] == [SUBJECT]


# --------------------------------------------------------------------------- the log


def test_the_log_record_carries_the_judge_trace(
    policies: PolicySet, model: tuple[api.FakeModel, str], tmp_path: Path
) -> None:
    """A judged verification's record has a ``judge`` field of the documented shape; an
    unjudged one has none; the API key is nowhere in the log."""
    _, url = model
    judged = rig(policies, url)
    results = [judged.verify(), judged.verify("灵通说v0.17已经发布了", type="communication")]
    judged.close()
    assertions = [Assertion(member="lingyi", type="fact", content="x")] * 2
    records = [
        verification_record(a, r, "test", "lingyi")
        for a, r in zip(assertions, results, strict=True)
    ]
    assert VerificationRecord.model_validate(records[0]).to_log() == records[0]
    JudgeTrace.model_validate(records[0]["judge"])
    assert records[0]["judge"]["outcome"] == "satisfied" and "judge" not in records[1]
    assert FAKE_KEY not in json.dumps(records)


def _config(tmp_path: Path, url: str, on_error: str, enabled: bool = True) -> Path:
    path = tmp_path / f"lingyi-{on_error}-{enabled}.toml"
    path.write_text(
        f'[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n\n[judge]\n'
        f'enabled = {str(enabled).lower()}\nbase_url = "{url}"\napi_key_env = "{KEY_ENV}"\n'
        f'on_error = "{on_error}"\ntimeout_s = 2.0\n',
        encoding="utf-8",
    )
    return path


def _replay(config: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    main(["--config", str(config), "--log", str(log), "replay", *map(str, EXAMPLES)])
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _without_judge(row: dict[str, Any]) -> dict[str, Any]:
    kept = [c for c in row["checks"] if c["stage"] != "judge"]
    return {**row, "checks": [{k: v for k, v in c.items() if k != "reason"} for c in kept]}


@pytest.mark.parametrize("on_error", ["pass", "fail"])
def test_a_replay_with_the_judge_unreachable_changes_only_what_on_error_says(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    on_error: str,
) -> None:
    """The same deterministic decisions as without the judge, plus the on_error effect:
    with pass nothing changes; with fail exactly the approvals the judge applies to become
    rejections. Rejections and fallbacks are identical (the judge was never asked)."""
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    url = closed_port_url()
    base = _replay(_config(tmp_path, url, on_error, enabled=False), tmp_path / "a.jsonl", capsys)
    judged = _replay(_config(tmp_path, url, on_error), tmp_path / "b.jsonl", capsys)
    assert [r["id"] for r in base] == [r["id"] for r in judged] and len(base) >= 60
    for before, after in zip(base, judged, strict=True):
        asked = [c for c in after["checks"] if c["stage"] == "judge"]
        if before["decision"] != "approved":
            assert after == before and not asked
            continue
        same = _without_judge(after)["checks"] == _without_judge(before)["checks"]
        codes = [c["code"] for c in _without_judge(after)["checks"]]
        assert codes == [c["code"] for c in before["checks"]]  # the same checks ran
        assert same or (asked and on_error == "fail")  # only an uncertain check may flip
        expected = "rejected" if asked and on_error == "fail" else "approved"
        assert after["decision"] == expected, after
    records = [line.record for line in read_log(tmp_path / "b.jsonl") if line.record]
    traces = [r["judge"] for r in records if "judge" in r]
    assert traces and {(t["outcome"], t["why"]) for t in traces} == {("grader_error", "connection")}
    assert FAKE_KEY not in (tmp_path / "b.jsonl").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- figures


def test_stats_and_the_weekly_report_show_the_judge(
    policies: PolicySet, model: tuple[api.FakeModel, str], tmp_path: Path
) -> None:
    """Calls, cache hits, spend and verdicts per criterion reach stats and the report (under
    what changed, beside the week before); a week without the judge has no judge section."""
    from lingyi.log import VerificationLog

    state, url = model
    state.script = lambda r: api.tool_use(
        r,
        api.verdict(r, {"c2": "contradicts m-3"})
        if "暂缓" in api.data_of(r)["content"]
        else api.verdict(r),
    )
    judged = rig(policies, url)
    path = tmp_path / "log.jsonl"
    log = VerificationLog(path)
    for content in ["会议纪要已发送", "会议纪要已发送", "发布暂缓已通知", "灵通说v0.17已经发布了"]:
        kind = "communication" if content.startswith("灵通") else "fact"
        assertion = Assertion(member="lingyi", type=kind, content=content)
        log.append(
            verification_record(
                assertion, judged.layer.verify(assertion, judged.ledger), "t", "lingyi"
            )
        )
    log.close()
    judged.close()
    stats = compute_stats(path, days_window(1, resolve_zone("UTC")))
    figures = stats["judge"]
    assert (figures["consulted"], figures["calls"], figures["cache_hits"]) == (3, 2, 1)
    assert figures["outcomes"]["satisfied"] == 2 and figures["outcomes"]["needs_revision"] == 1
    assert figures["spend_usd"] == pytest.approx(2 * (1200 * 1.0 + 150 * 5.0) / 1e6)
    worst = figures["criteria"][0]
    assert worst["failed"] == 1 and worst["criterion"].startswith(
        "Nothing in the content contradicts"
    )
    report = render_markdown(stats, "en")
    assert "### Judge" in report and "Cache hits" in report and worst["criterion"] in report
    assert "| Outcome: needs_revision | 1 | 0 | +1 | 33.3% |" in report
    assert "| Calls to the model | 2 | 0 | +2 |  |" in report
    empty = render_markdown({**stats, "judge": {**figures, "consulted": 0}}, "en")
    assert "Judge" not in empty and "Calls to the model" not in empty
    page = render_html(stats, "zh")
    assert '<h3 id="judge">评审模型</h3>' in page and "缓存命中" in page
    year, week, _ = datetime.now(UTC).isocalendar()
    window = week_window(f"{year}-W{week:02d}", resolve_zone("UTC"))
    for rebuild in (True, False):  # the index made from the whole log, then read back
        assert compute_stats(path, window, rebuild=rebuild)["judge"]["consulted"] == 3
