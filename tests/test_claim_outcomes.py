"""Comparing a claim with the record: entailed passes, contradicted rejects, not settled is
uncertain (issue 25, docs/checks.md "Three outcomes").

One table per class of the issue, in Chinese and in English: the violation (a real
contradiction, or a claim no record makes) and its legitimate look-alike. Every row is also
run written in traditional script, with a zero-width space inside a word, in full-width
letters, typed as another kind of assertion, and behind the speaker's own name: the decision
must not move. Uses the shipped policies, a real knowledge base (SQLite FTS5) over a folder
of two runbooks, the in-memory council record and the session ledger.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path

import opencc
import pytest

from lingyi.backends.kb import KnowledgeBase
from lingyi.checks._registry import Services
from lingyi.config import defaults_dir, load_config
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.guard import Guard, kb_lookups
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence, VerificationResult
from lingyi.policy import PolicySet
from lingyi.stats import compute_stats, window_from_args

RECORD = [
    ("m-1", "lingflow", "v0.16 审计已完成，报告见 audit-v0.16.md，共发现 2 个中危问题，没有高危。"),
    ("m-2", "lingflow", "v0.15 hotfix audit: no findings."),
    ("m-3", "lingflow", "v0.17 的发布暂缓，等待安全评审。"),
    ("m-4", "lingresearch", "I ran descriptive statistics on reading_survey first."),
    ("m-5", "lingresearch", "先跑描述统计，再做回归。"),
    ("m-6", "lingresearch", "回归基准跑完：p95 延迟 231ms，kappa 0.82。"),
    ("m-7", "lingresearch", "Regression benchmark done: p95 latency 231 ms, kappa 0.82."),
    ("m-8", "lingflow", "v0.21 不会在周四发布，推迟到下周一。"),
    ("m-9", "lingzhi", "昨天：复核 3 篇。阻塞：无。"),
    ("m-10", "lingzhi", "Yesterday: reviewed 3 entries. Blockers: none."),
    ("m-11", "lingflow", "release/v0.22 的 CI 已通过。"),
    ("m-12", "lingflow", "Pushed release/v0.23 to origin; tag v0.23 not created yet."),
    ("m-13", "lingzhi", "术语表已更新，新增 12 条词条。"),
]
ACTIVITY = Evidence(
    id="an-9",
    title="council activity by member, week 48",
    snippet="lingyi 142 messages, lingflow 97, lingzhi 88, lingresearch 61",
)
RUNBOOKS = {
    "ops-001.md": "---\nid: kb:ops-001\ntitle: 发布回滚手册\ndomain: 运维\ntags: [发布, 回滚]\n"
    "---\n灰度发布期间持续观察错误率。错误率超过 2% 时立即回滚到上一个版本，"
    "并在议事会说明原因。回滚后 30 分钟内复查监控。\n",
    "ops-002.md": "---\nid: kb:ops-002\ntitle: Release rollback runbook\ndomain: ops\n"
    "tags: [release, rollback]\n---\nDuring a canary release, watch the error rate. Roll "
    "back to the previous version as soon as the error rate exceeds 2%, and say why on the "
    "council. Check the dashboards again within 30 minutes of the rollback.\n",
}

# (speaker, declared type, content, decision)
CLASS_1_ABSENCE = [  # a number the evidence gives no value of its kind, or that follows from it
    (
        "lingresearch",
        "fact",
        "LingResearch posted 61 messages this week, the fewest of the four.",
        "approved",
    ),
    ("lingresearch", "fact", "本周灵研发了 61 条消息，是四位成员中最少的。", "approved"),
    ("lingresearch", "fact", "1. council_activity 本周共 388 条消息。", "approved"),
    ("lingresearch", "fact", "lingyi 142 条，比 lingflow 多 45 条（142 − 97 = 45）。", "approved"),
    # "about" covers both ends of a range
    (
        "lingresearch",
        "fact",
        "Messages per member ranged from about 60 to 140 this week.",
        "approved",
    ),
    ("lingresearch", "fact", "本周每位成员的消息数约在 60 到 140 之间。", "approved"),
    (
        "lingresearch",
        "fact",
        "Messages per member ranged from about 60 to 190 this week.",
        "rejected",
    ),
    ("lingresearch", "fact", "本周每位成员的消息数约在 60 到 190 之间。", "rejected"),
    ("lingresearch", "fact", "LingResearch posted 71 messages this week.", "rejected"),
    ("lingresearch", "fact", "本周 lingzhi 发了 98 条消息。", "rejected"),
]
CLASS_2_PARAPHRASE = [  # relays worded otherwise, across languages, with one detail more
    (
        "lingyi",
        "communication",
        "LingFlow said the v0.16 audit is done: two medium findings, no high ones.",
        "approved",
    ),
    ("lingyi", "communication", "灵通说 v0.15 热修复审计没有发现问题。", "approved"),
    (
        "lingyi",
        "communication",
        "LingFlow said the v0.15 hotfix audit came back clean.",
        "approved",
    ),
    ("lingyi", "communication", "灵研说她先做了描述统计。", "approved"),
    ("lingyi", "communication", "灵通说 v0.16 审计发现了高危问题。", "rejected"),
    ("lingyi", "communication", "LingFlow said the v0.16 audit found no issues.", "rejected"),
    ("lingyi", "communication", "LingFlow said v0.17 has shipped.", "rejected"),
    ("lingyi", "communication", "灵通说 v0.16 审计被取消了。", "rejected"),
    # a number marked approximate agrees with a recorded value that rounds to it
    ("lingyi", "communication", "灵研说 p95 延迟约 230ms。", "approved"),
    ("lingyi", "communication", "LingResearch said p95 latency is about 230 ms.", "approved"),
    ("lingyi", "communication", "灵研说 kappa 约为 0.8。", "approved"),
    ("lingyi", "communication", "LingResearch said kappa was around 0.8.", "approved"),
    ("lingyi", "communication", "灵研说 p95 延迟约 300ms。", "rejected"),
    ("lingyi", "communication", "LingResearch said p95 latency is about 300 ms.", "rejected"),
    ("lingyi", "communication", "灵研说 p95 延迟 230ms。", "rejected"),  # exact, and not 231
    ("lingyi", "communication", "LingResearch said kappa was 0.8.", "rejected"),
    (
        "lingyi",
        "communication",
        "LingZhi says a dozen or so glossary terms were added.",
        "approved",
    ),
    ("lingyi", "communication", "灵知说术语表新增了十二条左右。", "approved"),
    ("lingyi", "communication", "LingZhi says about thirty glossary terms were added.", "rejected"),
    ("lingyi", "communication", "灵知说术语表新增了三十条左右。", "rejected"),
    # a label whose value is none ("阻塞：无", "Blockers: none") says there is none of it
    ("lingyi", "communication", "灵知说没有阻塞。", "approved"),
    ("lingyi", "communication", "LingZhi said there are no blockers.", "approved"),
    ("lingyi", "communication", "灵知说目前有阻塞。", "rejected"),
    ("lingyi", "communication", "LingZhi said the GPU queue is a blocker.", "rejected"),
    # an outcome (passed) the record does not give is invented; one it gives is entailed
    ("lingyi", "communication", "灵通说 v0.17 的安全评审已经通过了。", "rejected"),
    ("lingyi", "communication", "LingFlow said the v0.17 security review passed.", "rejected"),
    ("lingyi", "communication", "灵通说 release/v0.22 的 CI 通过了。", "approved"),
    ("lingyi", "communication", "LingFlow said CI passed on release/v0.22.", "approved"),
    # a negator that ends its clause ("tag v0.23 not created yet") denies what precedes it
    ("lingyi", "communication", "灵通说已经打了 v0.23 的 tag。", "rejected"),
    ("lingyi", "communication", "LingFlow said v0.23 was tagged.", "rejected"),
    ("lingyi", "communication", "灵通说 release/v0.23 已推送到 origin。", "approved"),
    ("lingyi", "communication", "LingFlow said the v0.23 tag is not created yet.", "approved"),
    # 不会 negates what follows (会 is the auxiliary, not a meeting)
    ("lingyi", "communication", "灵通说 v0.21 周四发布。", "rejected"),
    ("lingyi", "communication", "LingFlow said v0.21 ships on Thursday.", "rejected"),
    ("lingyi", "communication", "灵通说 v0.21 不会在周四发布。", "approved"),
    ("lingyi", "communication", "LingFlow said v0.21 moves to next Monday.", "approved"),
]
SHA = "7c3e9a1f2b4d6e8a0c1e3f5a7b9d1c3e5f7a9b1d"
CLASS_ID = [  # a short SHA abbreviates the commit a tool recorded (as "commit:<sha>")
    ("lingflow", "communication", "索引修复已提交，commit 7c3e9a1。", "approved"),
    ("lingflow", "communication", "The index fix is committed as commit 7c3e9a1.", "approved"),
    ("lingflow", "communication", "索引修复已提交，commit 7c3e9b2。", "rejected"),
    ("lingflow", "communication", "The index fix is committed as commit 7c3e9b2.", "rejected"),
]
CLASS_6_RECORD = [  # another member's work restated from the council record, no tool evidence
    (
        "lingyi",
        "fact",
        "LingFlow's v0.16 audit is complete, with 2 medium findings and no high ones.",
        "approved",
    ),
    ("lingyi", "fact", "灵通的 v0.16 审计已完成，发现 2 个中危问题。", "approved"),
    ("lingyi", "fact", "LingFlow's v0.16 audit is complete, with 3 high findings.", "rejected"),
    ("lingyi", "fact", "灵通的 v0.18 审计已完成。", "rejected"),
]
CLASS_9_DOCUMENT = [  # a claim that cites a document is compared with the document's text
    ("lingflow", "fact", "按 kb:ops-001，错误率超过 2% 就回滚。", "approved"),
    (
        "lingflow",
        "fact",
        "Per kb:ops-002, we roll back when the error rate exceeds 2%.",
        "approved",
    ),
    ("lingflow", "fact", "按 kb:ops-001，错误率超过 10% 才回滚。", "rejected"),
    (
        "lingflow",
        "fact",
        "Per kb:ops-002, we roll back when the error rate exceeds 10%.",
        "rejected",
    ),
    ("lingflow", "fact", "Per kb:ops-002, recheck the dashboards within 60 minutes.", "rejected"),
]

OWN_NAMES = {"lingyi": "灵依", "lingflow": "LingFlow", "lingresearch": "灵研"}
_TRADITIONAL = opencc.OpenCC("s2t")


def _zero_width(text: str) -> str:
    """A zero-width space inside the first word of two CJK characters or four letters."""
    for i in range(len(text) - 1):
        pair = text[i : i + 2]
        if all("\u4e00" <= c <= "\u9fff" for c in pair) or (
            pair.isalpha() and pair.isascii() and text[i - 2 : i].isalpha()
        ):
            return text[: i + 1] + "\u200b" + text[i + 1 :]
    return text


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


VARIANTS: dict[str, Callable[[str, str, str], tuple[str, str]]] = {
    "as written": lambda who, kind, text: (kind, text),
    "traditional": lambda who, kind, text: (kind, _TRADITIONAL.convert(text)),
    "zero-width": lambda who, kind, text: (kind, _zero_width(text)),
    "full-width": lambda who, kind, text: (kind, _full_width(text)),
    "other type": lambda who, kind, text: (
        "fact" if kind == "communication" else "communication",
        text,
    ),
    "own name": lambda who, kind, text: (kind, f"{OWN_NAMES[who]}：{text}"),
}


def _rows(table: list[tuple[str, str, str, str]]) -> list[object]:
    rows: list[object] = []
    for who, kind, text, decision in table:
        for variant in VARIANTS:
            rows.append(
                pytest.param(who, kind, text, decision, variant, id=f"{text[:28]}|{variant}")
            )
    return rows


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    folder = tmp_path_factory.mktemp("kb")
    for name, text in RUNBOOKS.items():
        (folder / name).write_text(text, encoding="utf-8")
    base = KnowledgeBase(folder, watch=False)
    yield base
    base.close()


@pytest.fixture(scope="module")
def layer(policies: PolicySet, kb: KnowledgeBase) -> ConstraintLayer:
    council = MemoryCouncil([CouncilMessage(id=i, sender=s, content=c) for i, s, c in RECORD])
    services = Services(lookups=kb_lookups(lambda: kb))
    return ConstraintLayer(policies, council, services=services, language="en")


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.record("s", "lingresearch", "analyze_data", {"source": "council_activity"}, [ACTIVITY])
    found = [Evidence(id="kb:ops-001", title="发布回滚手册", snippet="灰度发布期间持续观察错误率")]
    found += [Evidence(id="kb:ops-002", title="Release rollback runbook", snippet="watch it")]
    ledger.record("s", "lingzhi", "search_knowledge", {"query": "回滚 rollback"}, found)
    commit = Evidence(id=f"commit:{SHA}", title="fix: skip index rebuild", snippet="1 file")
    ledger.record("s", "lingflow", "git_commit", {"repo_path": "var/repos/kb"}, [commit])
    return ledger


def _verify(
    layer: ConstraintLayer, who: str, kind: str, text: str, variant: str
) -> VerificationResult:
    kind, text = VARIANTS[variant](who, kind, text)
    assertion = Assertion(member=who, type=kind, session="s", content=text)
    return layer.verify(assertion, _ledger())


def _decided(result: VerificationResult, decision: str) -> None:
    assert result.decision.value == decision, [
        (c.code, c.reason) for c in result.checks if not c.passed
    ]


@pytest.mark.parametrize(("who", "kind", "text", "decision", "variant"), _rows(CLASS_1_ABSENCE))
def test_a_number_the_evidence_does_not_give_is_no_contradiction(
    layer: ConstraintLayer, who: str, kind: str, text: str, decision: str, variant: str
) -> None:
    """List numbering, "of the four", a derived difference pass; a count the evidence gives
    another value rejects."""
    _decided(_verify(layer, who, kind, text, variant), decision)


@pytest.mark.parametrize(("who", "kind", "text", "decision", "variant"), _rows(CLASS_ID))
def test_a_short_sha_of_a_recorded_commit_is_recorded(
    layer: ConstraintLayer, who: str, kind: str, text: str, decision: str, variant: str
) -> None:
    """A commit cited by its first digits is the commit a tool recorded, whatever prefix the
    tool gave its id; digits no recorded commit begins with are fabricated."""
    _decided(_verify(layer, who, kind, text, variant), decision)


@pytest.mark.parametrize(("who", "kind", "text", "decision", "variant"), _rows(CLASS_2_PARAPHRASE))
def test_a_paraphrased_relay_passes_and_a_contradicted_one_is_rejected(
    layer: ConstraintLayer, who: str, kind: str, text: str, decision: str, variant: str
) -> None:
    """Synonyms, the other language, one detail more: not contradicted. Another value, the
    opposite polarity, a state no record gives: rejected."""
    _decided(_verify(layer, who, kind, text, variant), decision)


@pytest.mark.parametrize(("who", "kind", "text", "decision", "variant"), _rows(CLASS_6_RECORD))
def test_another_members_work_on_the_council_record_is_backed(
    layer: ConstraintLayer, who: str, kind: str, text: str, decision: str, variant: str
) -> None:
    """A fact that restates what another member posted passes with no tool evidence; one the
    record contradicts, or that no message of that member makes, is rejected."""
    _decided(_verify(layer, who, kind, text, variant), decision)


@pytest.mark.parametrize(("who", "kind", "text", "decision", "variant"), _rows(CLASS_9_DOCUMENT))
def test_a_claim_that_cites_a_document_is_compared_with_its_text(
    layer: ConstraintLayer, who: str, kind: str, text: str, decision: str, variant: str
) -> None:
    """The runbook says roll back above 2%: citing it for 10% (or 60 minutes for 30) is
    rejected, citing it for 2% passes."""
    _decided(_verify(layer, who, kind, text, variant), decision)


OUTCOMES = [
    (
        "lingflow",
        "Per kb:ops-002, we roll back when the error rate exceeds 2%.",
        "evidence.cited_documents",
        "entailed",
        False,
    ),
    (
        "lingflow",
        "Per kb:ops-002, we roll back when the error rate exceeds 10%.",
        "evidence.cited_documents",
        "contradicted",
        False,
    ),
    (
        "lingflow",
        "Per kb:ops-002, the on-call engineer pages the database team first.",
        "evidence.cited_documents",
        "not_settled",
        True,
    ),
    (
        "lingyi",
        "灵通说 v0.16 审计发现了高危问题。",
        "communication.on_record",
        "contradicted",
        False,
    ),
    (
        "lingyi",
        "灵通说 v0.15 热修复审计没有发现问题。",
        "communication.on_record",
        "entailed",
        False,
    ),
    ("lingyi", "灵通说 v0.19 已经发布。", "communication.on_record", "contradicted", False),
    ("lingyi", "灵知说 v0.19 已经发布。", "communication.on_record", "no_record", False),
    (
        "lingresearch",
        "LingResearch posted 71 messages this week.",
        "evidence.subject_supported",
        "contradicted",
        False,
    ),
]


@pytest.mark.parametrize(("who", "text", "code", "outcome", "uncertain"), OUTCOMES)
def test_each_comparing_check_says_which_outcome_it_found(
    layer: ConstraintLayer, who: str, text: str, code: str, outcome: str, uncertain: bool
) -> None:
    """detail["outcome"] names the outcome; only not_settled is uncertain (and passes with
    no judge configured, degraded)."""
    result = _verify(layer, who, "fact", text, "as written")
    check = next(c for c in result.checks if c.code == code)
    assert (check.detail["outcome"], check.uncertain) == (outcome, uncertain), check.reason
    assert check.passed is (outcome in ("entailed", "not_settled"))


def test_without_a_document_lookup_a_cited_document_is_not_compared(
    policies: PolicySet, tmp_path: Path
) -> None:
    """Offline replay has no knowledge base: the check passes and says it compared nothing."""
    layer = ConstraintLayer(policies, MemoryCouncil(), services=Services(), language="en")
    text = "Per kb:ops-002, we roll back when the error rate exceeds 10%."
    result = layer.verify(
        Assertion(member="lingflow", type="fact", session="s", content=text), _ledger()
    )
    check = next(c for c in result.checks if c.code == "evidence.cited_documents")
    assert check.passed and "outcome" not in check.detail


def test_a_not_settled_relay_passes_marked_uncertain_in_the_log(tmp_path: Path) -> None:
    """The shipped policy with no judge: the relay passes, degraded, and the log record lists
    communication.on_record under ``uncertain`` (what the weekly figures count)."""
    config = load_config(defaults_dir() / "lingyi.toml", log=tmp_path / "log.jsonl")
    council = MemoryCouncil([CouncilMessage(id=i, sender=s, content=c) for i, s, c in RECORD])
    guard = Guard.from_config(config, source="test", council=council)
    text = "LingFlow said the v0.16 audit report is long."
    result = guard.check(Assertion(member="lingyi", type="communication", content=text), Ledger())
    guard.close()
    check = next(c for c in result.checks if c.code == "communication.on_record")
    assert result.decision.value == "approved" and check.uncertain and check.degraded
    assert check.detail["outcome"] == "not_settled"
    record = json.loads(config.log_path.read_text(encoding="utf-8").splitlines()[-1])
    assert record["uncertain"] == ["communication.on_record"]
    week = compute_stats(config.log_path, window_from_args(UTC, days=7), index=tmp_path / "i")
    figures = week["uncertain"]
    assert (figures["total"], figures["approved"], figures["share"]) == (1, 1, 1.0)
    assert figures["by_code"] == {"communication.on_record": 1}
