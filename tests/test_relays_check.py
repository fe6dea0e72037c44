"""communication.on_record through the layer: every relay, whatever the declared type.

The council record and the ledger here are this file's own, written for these rows. Each
table pins both sides in Chinese and English: relays that match what was said or done pass,
relays that do not are rejected with the member whose record to check; a relay across
languages with words the glossary cannot compare is uncertain, and the shipped
``on_uncertain`` rejects it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, Evidence, VerificationResult
from lingyi.policy import PolicySet, load_policies
from tests.conftest import SHIPPED_POLICIES

RECORD = [
    ("r-1", "lingflow", "v2.9 迁移脚本已合入主干，CI 全绿。"),
    ("r-2", "lingflow", "The nightly build for v2.9 is on hold until the signing key is rotated."),
    ("r-3", "lingresearch", "exp-90 清洗完成：共 4,100 条样本，去重 37 条。"),
    ("r-4", "lingzhi", "The 大学 reading notes were finalised on Thursday; 6 sections."),
    ("r-5", "lingzhi", "The lantern festival stream had 3,400 viewers."),
    ("r-6", "lingflow", "v3.0 的发布暂缓，等待签名密钥轮换。"),
]


@pytest.fixture
def record() -> MemoryCouncil:
    return MemoryCouncil([CouncilMessage(id=i, sender=s, content=c) for i, s, c in RECORD])


@pytest.fixture
def work() -> Ledger:
    ledger = Ledger()
    report = Evidence(id="audit-v3.1", title="audit report v3.1", snippet="12 commits since v3.0")
    ledger.record("s7", "lingflow", "generate_audit_report", {"version": "v3.1"}, [report])
    counts = Evidence(
        id="an-77", title="council messages by member", snippet="lingflow 1,204; lingzhi 388"
    )
    ledger.record("s7", "lingresearch", "analyze_data", {"source": "council_activity"}, [counts])
    return ledger


def check(result: VerificationResult) -> CheckResult:
    return next(c for c in result.checks if c.code == "communication.on_record")


def verify(
    policies: PolicySet, council: MemoryCouncil, ledger: Ledger, content: str, **fields: str
) -> VerificationResult:
    layer = ConstraintLayer(policies, council, language=fields.pop("lang", "en"))
    fields = {"member": "lingyi", "type": "communication", "session": "s7", **fields}
    return layer.verify(Assertion.model_validate({**fields, "content": content}), ledger)


DECLARED = [
    ("灵通说 v2.9 的迁移脚本已经合并了", True),
    ("LingFlow said the v2.9 migration script is merged and CI is green.", True),
    ("灵通说 v2.9 的夜间构建已经发布", False),  # r-2: on hold
    ("LingZhi said the 大学 notes were finalised on Friday.", False),  # r-4: Thursday
    # a state inside a condition is not claimed; one narrated after "after" is
    ("LingFlow says the v2.9 nightly build is held until the signing key is rotated.", True),
    ("LingFlow says the v2.9 nightly build is on hold until the key is done.", True),
    ("LingFlow says that after the key rotation the v2.9 nightly build was released.", False),
    ("灵通说等到签名密钥轮换完成，v2.9 的夜间构建就已经发布了", False),
    ("LingFlow said if you ask me the v2.9 nightly build is released.", False),  # no condition
    ("灵通说 v3.0 的发布暂缓，等签名密钥轮换完成", True),  # waiting: the rotation not claimed
    ("靈通說 v3.0 的發佈暫緩到簽名密鑰輪換完成為止", True),  # traditional script
    ("灵通说等密钥轮换完成，v3.0 已经发布了", False),  # the release is claimed
    ("灵通说 v3.0 发布才两天", False),
    ("LingFlow says, unless I misread, that the v2.9 nightly build was released.", False),
    # 这周一条: a count this week, not Monday; "not one … at all" is none
    ("灵研说 exp-90 这周一条重复样本都没有去掉", False),  # r-3: 37 removed
]


@pytest.mark.parametrize("kind", ["fact", "communication"])
@pytest.mark.parametrize(("content", "on_record"), DECLARED)
def test_a_relay_is_checked_whatever_its_declared_type(
    policies: PolicySet,
    record: MemoryCouncil,
    work: Ledger,
    kind: str,
    content: str,
    on_record: bool,
) -> None:
    """A relay sent as a fact is checked against the record exactly like a communication."""
    result = check(verify(policies, record, work, content, type=kind))
    assert result.passed is on_record, result.reason


SPEAKERS = [
    ("灵通说迁移脚本已合入，灵研说 exp-90 清洗完成了", []),
    ("灵通和灵研都说 v2.9 迁移脚本已合入", ["lingresearch"]),
    ("LingFlow said the v2.9 script is merged and LingZhi said CI is green.", ["lingzhi"]),
    ("LingYan said exp-90 has 4,100 samples; LingZhi said the notes have 6 sections.", []),
    ("LingYan said exp-90 has 4,100 samples; LingZhi said the notes have 9 sections.", ["lingzhi"]),
]


@pytest.mark.parametrize(("content", "failing"), SPEAKERS)
def test_each_speaker_must_be_on_record(
    policies: PolicySet, record: MemoryCouncil, work: Ledger, content: str, failing: list[str]
) -> None:
    """Several speakers: each relay is checked against its own member's record."""
    result = check(verify(policies, record, work, content))
    relays = result.detail["relays"]
    assert [r["member"] for r in relays if r["status"] == "fail"] == failing
    assert result.passed is (not failing)


DENIALS = [
    ("灵通没说 v2.9 的迁移脚本合入了", False),  # r-1 says it
    ("LingFlow never said the nightly build shipped; he said it is on hold.", True),
]


@pytest.mark.parametrize(("content", "passes"), DENIALS)
def test_a_denial_fails_when_the_record_says_it(
    policies: PolicySet, record: MemoryCouncil, work: Ledger, content: str, passes: bool
) -> None:
    """ "灵通没说 X" is false when 灵通's record says X; a true correction passes."""
    assert check(verify(policies, record, work, content)).passed is passes


WORK = [
    ("s7", "灵通已经生成了 v3.1 的审计报告", True),
    ("s8", "灵通已经生成了 v3.1 的审计报告", False),  # evidence of that work is in s7 only
    ("s7", "LingFlow generated the v3.2 audit report.", False),
    ("s7", "LingFlow posted 1,204 council messages.", True),  # an analysis that names it
    ("s7", "LingFlow posted 2,104 council messages.", False),
]


@pytest.mark.parametrize(("session", "content", "passes"), WORK)
def test_work_evidence_backs_a_relay_in_its_own_session_only(
    policies: PolicySet,
    record: MemoryCouncil,
    work: Ledger,
    session: str,
    content: str,
    passes: bool,
) -> None:
    """Recorded work (or evidence naming the member) supports a work claim in that session."""
    result = check(verify(policies, record, work, content, session=session))
    assert result.passed is passes, result.reason


def test_words_the_glossary_cannot_compare_make_the_check_uncertain(
    policies: PolicySet, record: MemoryCouncil, work: Ledger
) -> None:
    """Numbers agree, the rest cannot be compared across scripts: not settled. The shipped
    policy hands that to the judge; with none configured it passes, marked uncertain and
    degraded (issue 25: what no rule settles is not a contradiction)."""
    result = verify(policies, record, work, "灵知说元宵灯会直播有 3,400 名观众")
    assert check(result).uncertain and check(result).passed and check(result).degraded
    assert result.decision == "approved"
    relay = check(result).detail["relays"][0]
    assert (relay["status"], relay["why"]) == ("unsure", "words_unknown")


@pytest.mark.parametrize(("on_uncertain", "decision"), [("pass", "approved"), ("warn", "approved")])
def test_the_policy_settles_an_uncertain_relay(
    tmp_path: Path,
    record: MemoryCouncil,
    work: Ledger,
    on_uncertain: str,
    decision: str,
) -> None:
    """A deployment may choose another on_uncertain; the check still says it was uncertain."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    common = folder / "_common.toml"
    text = common.read_text(encoding="utf-8")
    common.write_text(text.replace('on_uncertain = "fail"', f'on_uncertain = "{on_uncertain}"'))
    result = verify(load_policies(folder), record, work, "灵知说元宵灯会直播有 3,400 名观众")
    assert result.decision == decision and check(result).uncertain


@pytest.mark.parametrize(
    ("lang", "reason", "hint"),
    [
        (
            "zh",
            "灵通 的记录中没有相符的消息（最接近的 r-2：状态与记录矛盾：转述为已完成，记录为暂缓）",
            "灵通（lingflow）",
        ),
        (
            "en",
            "no message from lingflow matches (closest r-2: status contradicts the record: claim done, record on hold)",
            "lingflow's messages",
        ),
    ],
)
def test_a_rejection_names_the_closest_record_and_what_differs(
    policies: PolicySet, record: MemoryCouncil, work: Ledger, lang: str, reason: str, hint: str
) -> None:
    """The reason shows the closest message and why; the hint says whose record to check."""
    result = verify(
        policies, record, work, "LingFlow said the v2.9 nightly build is done.", lang=lang
    )
    assert reason in check(result).reason
    assert hint in (result.recommendation or "")
