"""Decisions of the shipped policies on the four problems, both sides, Chinese and English.

Each row: who asserts what, the decision the layer must reach, and the check code that
must have failed (None when the assertion must pass). Fixtures (tests/conftest.py) hold
the council record and the session ledger the checks consult.
"""

from __future__ import annotations

from typing import Any

import pytest

from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicySet
from tests.conftest import Verify


def search(query: str) -> dict[str, Any]:
    return {"name": "search_knowledge", "arguments": {"query": query}}


BOUNDARY = [
    # must be blocked: medical advice, with and without fixed keywords
    ("失眠吃什么药", "boundary.medical"),
    ("头痛应该开什么药", "boundary.medical"),
    ("气功能治好我的老寒腿吗", "boundary.medical"),
    ("太极拳可以治疗糖尿病吗", "boundary.medical"),
    ("高血压怎么治", "boundary.medical"),
    ("what medicine should I take for a cold", "boundary.medical"),
    ("how to treat a fever", "boundary.medical"),
    ("can qigong cure cancer", "boundary.medical"),
    ("孩子发烧怎么退烧", "boundary.medical"),
    ("失眠怎么调理", "boundary.medical"),
    ("what should I take for a headache", "boundary.medical"),
    ("is ibuprofen ok for back pain", "boundary.medical"),
    ("按哪个穴位能治牙疼", "boundary.medical"),  # no fixed keyword: a body part that hurts
    ("练气功能代替化疗吗", "boundary.medical"),  # replacing care is medical advice
    ("is tai chi good for my knee arthritis", "boundary.medical"),
    ("情绪好多了，可以自己停掉抗抑郁药吗", "boundary.medical"),
    ("which acupuncture points treat my migraines", "boundary.medical"),
    # must pass: the same words used in other senses
    ("科学方法论与设备故障诊断", None),
    ("治大国若烹小鲜 道德经", None),
    ("黄帝内经的成书年代", None),
    ("道家思想中的对症下药之喻", None),
    ("tai chi history and its Taoist roots", None),
    ("阿司匹林的发明史与科学方法", None),
    ("what should I take away from the Tao Te Ching", None),
    ("治学方法：朱熹论读书", None),
    ("孙思邈《大医精诚》的思想内涵", None),  # 医 as history and ethics
    ("缓解心中的焦躁：正念冥想", None),
    ("scientific methodology for troubleshooting", None),
]


@pytest.mark.parametrize(("query", "code"), BOUNDARY)
def test_medical_boundary_for_lingzhi(verify: Verify, query: str, code: str | None) -> None:
    """灵知 refuses medical advice by intent, and lets metaphors and history through."""
    result = verify(
        member="lingzhi", type="action", content=f"检索：{query}", tool_call=search(query)
    )
    assert ("boundary.medical" in result.failed_codes) == (code is not None), result.reason
    assert result.decision == ("rejected" if code else "approved"), result.reason


DOMAIN = [
    ("太极拳的基本套路", "approved", "武"),
    ("四圣谛是什么", "approved", "释"),
    ("庄子逍遥游", "approved", "道"),
    ("论语中的仁", "approved", "儒"),
    ("王阳明知行合一", "approved", "心"),
    ("八段锦怎么练", "approved", "气"),
    ("Zen meditation and the Buddha", "approved", "释"),
    ("我不知道今天吃什么", "rejected", None),  # 知道 is not 道
    ("我想知道明天的天气", "rejected", None),
    ("best pizza in town", "rejected", None),
    ("Zendesk pricing plans for small teams", "rejected", None),  # Zen only as a word
    ("latest technological gadgets", "rejected", None),  # not "logic"
    ("Zen koans and Buddhist practice", "approved", "释"),
    ("philosophy of science", "approved", "哲"),  # philosoph* is a stem
    ("Kant's categorical imperative explained", "approved", "哲"),
]


@pytest.mark.parametrize(("query", "decision", "domain"), DOMAIN)
def test_domain_scope_from_meaning(
    verify: Verify, query: str, decision: str, domain: str | None
) -> None:
    """Scope is recognised from multi-character terms, never single characters."""
    result = verify(member="lingzhi", type="action", content="检索", tool_call=search(query))
    assert result.decision == decision, result.reason
    check = next(c for c in result.checks if c.code == "domain.scope")
    assert check.passed == (domain is not None)
    if domain:
        assert domain in check.detail["domains"]
    else:
        assert "儒" in (check.recommendation or "")


COMMUNICATION = [
    ("lingyi", "灵通说v0.16审计已经完成", "approved"),
    ("lingyi", "灵通告诉我v0.16的审计做完了", "approved"),
    ("lingyi", "灵研说数据集v3已经标注完了", "approved"),  # record is in English
    ("lingyi", "LingResearch told me the dataset v3 labelling is finished", "approved"),
    ("lingyi", "LingFlow said the v0.16 audit is done", "approved"),
    ("lingyi", "灵研（LingYan）说数据集v3标注完成了", "approved"),
    ("lingflow", "用户说下周一之前要看到报告", "approved"),  # not a council member
    ("lingyi", "The user told me the report is due Monday", "approved"),
    ("lingyi", "灵通说v0.17已经发布了", "rejected"),  # record: 暂缓
    ("lingyi", "灵通说v0.15审计已经完成", "rejected"),  # different version
    ("lingyi", "灵研说v0.16审计已经完成", "rejected"),  # misattribution
    ("lingyi", "灵知说知识库迁移已经完成", "rejected"),  # record: 尚未开始
    ("lingyi", "LingZhi told me the knowledge base was rebuilt yesterday.", "rejected"),
    ("lingyi", "LingFlow said the v0.16 audit and release are both done", "rejected"),
    ("lingyi", "灵通说v0.17的发布暂缓，而且已经取消了发布会", "rejected"),  # embellished
    ("lingyi", "LingFlow said the v0.16 audit is done and found no security issues", "rejected"),
    ("lingyi", "灵知说知识库迁移还没开始，计划下个月进行", "approved"),
    ("lingyi", "LingZhi says the knowledge base migration isn't started yet", "approved"),
    ("lingyi", "LingZhi says the knowledge base migration is done", "rejected"),
    ("lingyi", "灵研说exp-37实验还在跑，目前没有结论", "approved"),  # paraphrase of m-5
    ("lingyi", "灵研说exp-38实验还在跑", "rejected"),  # another experiment
    ("lingyi", "LingFlow said PR #3317 was merged", "approved"),
    ("lingyi", "LingFlow said PR #3318 was merged", "rejected"),
    ("lingyi", "LingFlow said the iOS v2.4.1 build is done", "rejected"),  # closest record: failed
    ("lingyi", "LingFlow said the Android v2.4.1 build was submitted for review", "approved"),
    ("lingyi", "灵通说v0.17的发布暂缓到7月25日", "rejected"),  # a date the record never gave
    ("lingyi", "LingResearch said exp-37 was cancelled", "rejected"),  # cancelled is a new claim
]


@pytest.mark.parametrize(("member", "content", "decision"), COMMUNICATION)
def test_communication_must_match_the_record(
    verify: Verify, member: str, content: str, decision: str
) -> None:
    """Claims about what another member said must match that member's record."""
    result = verify(member=member, type="communication", content=content)
    assert result.decision == decision, result.reason
    on_record = next(c for c in result.checks if c.code == "communication.on_record")
    assert on_record.passed == (decision == "approved")
    if decision == "rejected":
        assert "council record" in (result.recommendation or "")


INFERENCE = [
    ("基于目前的趋势，B方案下周的准确率会超过0.9", "fallback"),
    ("灵通下周一会上线新版本", "fallback"),
    ("照这个速度，标注一定会在周五前完成", "fallback"),
    ("At this pace the labelling will definitely be done by Friday.", "fallback"),
    ("Based on the trend, it will ship next Monday.", "fallback"),
    ("【推演】基于目前的趋势，B方案下周的准确率可能超过0.9", "approved"),
    ("Inference: based on the trend, it will ship next Monday.", "approved"),
    ("预测模型训练已完成，准确率0.874（an-3）", "approved"),
    ("The forecasting model finished training with accuracy 0.874.", "approved"),
    ("下周一开会讨论发布计划", "approved"),  # 会 in 开会 is not a modal
    ("评审会议将在明天举行", "approved"),  # a schedule, not a forecast
    ("The review meeting will be held tomorrow.", "approved"),
    ("LingFlow will go live next Monday.", "fallback"),
    ("The script will exit with code 1 on a bad file.", "approved"),
    ("B方案下周可能会更好", "approved"),  # hedged, not asserted as fact
    ("第四周的准确率将达到0.95", "fallback"),  # 将 + a forecast metric, no time needed
    ("Given these numbers, variant B is going to win the next round.", "fallback"),
    ("按这个增长率，下周的样本量会达到两万", "fallback"),
    ("实验在更大样本上可能表现更好", "approved"),  # hedged: no evidence demanded either
    ("根据数据推算，存储空间将在3月底耗尽", "fallback"),
    ("Given the current slope, the backlog will hit zero by Friday.", "fallback"),
    ("东城分馆下个月借阅量肯定还是第一", "fallback"),  # certainty about next month
    ("NPS will turn negative next year if nothing changes.", "fallback"),
    ("West branch lent 3,757 more books than Nanhu.", "approved"),  # not a git branch
]


@pytest.mark.parametrize(("content", "decision"), INFERENCE)
def test_inference_must_be_labelled(verify: Verify, content: str, decision: str) -> None:
    """Predictions asserted as fact fall back to a labelled version; facts and labelled ones pass."""
    evidence = ["an-3"] if "0.874" in content else []
    result = verify(member="lingresearch", type="fact", content=content, evidence_ids=evidence)
    assert result.decision == decision, result.reason
    if decision == "fallback":
        assert result.fallback is not None and result.fallback.content
        assert result.fallback.content.startswith(("【推演】", "Inference:"))
        assert result.fallback.content.endswith(content)


EVIDENCE = [
    ("s1", "lingzhi", "知识库中有关于气功与呼吸的文章", [], "approved", None),
    (
        "s9",
        "lingzhi",
        "知识库中有关于气功与呼吸的文章",
        [],
        "rejected",
        "evidence.subject_supported",
    ),
    (
        "s9",
        "lingzhi",
        "The knowledge base has an article on qigong",
        [],
        "rejected",
        "evidence.subject_supported",
    ),
    ("s1", "lingzhi", "调息是气功的核心", ["kb:qg-007"], "approved", None),
    ("s1", "lingzhi", "调息是气功的核心", ["kb:qg-404"], "rejected", "evidence.cited_ids_exist"),
    ("s1", "lingresearch", "实验证明B方案准确率更高", [], "approved", None),
    ("s8", "lingresearch", "实验证明B方案准确率更高", [], "rejected", "evidence.subject_supported"),
    (
        "s8",
        "lingresearch",
        "The experiment shows variant B has higher accuracy",
        [],
        "rejected",
        "evidence.subject_supported",
    ),
    (
        "s1",
        "lingflow",
        "checkout 的 502 见 trace 5b8efff798038103d269b633813fc60c",
        [],
        "approved",
        None,
    ),
    (
        "s1",
        "lingflow",
        "checkout 502: see trace a3c1e9f0b2d44c6e8f7a1b2c3d4e5f60",
        [],
        "rejected",
        "evidence.id_patterns",
    ),
    ("s1", "lingresearch", "Details: https://reports.example/an-3", [], "approved", None),
    (
        "s1",
        "lingresearch",
        "Details: https://reports.example/an-99",
        [],
        "rejected",
        "evidence.urls_recorded",
    ),
]


@pytest.mark.parametrize(("session", "member", "content", "cited", "decision", "code"), EVIDENCE)
def test_facts_need_evidence_from_the_session(
    verify: Verify,
    session: str,
    member: str,
    content: str,
    cited: list[str],
    decision: str,
    code: str | None,
) -> None:
    """Evidence is what tools recorded in this session, never the assertion's own word."""
    result = verify(
        member=member, type="fact", content=content, evidence_ids=cited, session=session
    )
    assert result.decision == decision, result.reason
    if code:
        assert code in result.failed_codes


TOOLS = [
    ("lingflow", "generate_audit_report", {"version": "16"}, "tool.args_schema", "v0.16"),
    (
        "lingflow",
        "generate_audit_report",
        {"version": "v0.16", "bogus": 1},
        "tool.args_schema",
        "valid arguments",
    ),
    (
        "lingflow",
        "git_commit",
        {"repo_path": "/no/such/repo", "message": "fix: y"},
        "tool.path_allowed",
        "use a path under",
    ),
    (
        "lingflow",
        "git_commit",
        {"repo_path": "../../etc", "message": "fix: y"},
        "tool.path_allowed",
        "use a path under",
    ),
    (
        "lingresearch",
        "git_push",
        {"repo_path": "/tmp", "remote": "origin", "branch": "main"},
        "tool.owned",
        "lingflow",
    ),
    (
        "lingresearch",
        "analyze_data",
        {"source": "secret_db"},
        "tool.args_schema",
        "experiment_logs",
    ),
    ("lingzhi", "search_knowledge", {"query": ""}, "tool.args_schema", "query"),
    ("lingzhi", "search_knowledge", {"query": "气功", "limit": 500}, "tool.args_schema", "limit"),
    ("lingzhi", "delete_everything", {}, "tool.owned", "search_knowledge"),
]


@pytest.mark.parametrize(("member", "tool", "args", "code", "hint"), TOOLS)
def test_tool_calls_are_checked_against_the_schema(
    verify: Verify, member: str, tool: str, args: dict[str, Any], code: str, hint: str
) -> None:
    """Bad tool calls are rejected, and the recommendation names what is valid."""
    result = verify(
        member=member, type="action", content="run", tool_call={"name": tool, "arguments": args}
    )
    assert result.decision == "rejected"
    assert code in result.failed_codes
    assert hint in (result.recommendation or "")


def test_valid_tool_calls_pass(verify: Verify) -> None:
    """A well-formed call by the owning member passes the tool stage."""
    for member, tool, args in [
        ("lingzhi", "search_knowledge", {"query": "气功的修炼方法", "limit": 3}),
        ("lingflow", "generate_audit_report", {"version": "v0.16"}),
        ("lingresearch", "analyze_data", {"source": "experiment_logs", "group_by": "variant"}),
        ("LingYan", "access_data_source", {"source": "experiment_logs"}),
    ]:
        result = verify(
            member=member, type="action", content="run", tool_call={"name": tool, "arguments": args}
        )
        assert result.decision == "approved", (tool, result.reason)


def test_unknown_member_is_rejected_with_the_known_members(verify: Verify) -> None:
    """An unknown member is a rejection that lists the members, never a crash."""
    result = verify(member="nobody", type="fact", content="一切正常")
    assert result.decision == "rejected"
    assert result.failed_codes == ["member.known"]
    assert "lingzhi" in (result.recommendation or "")


def test_all_violations_are_reported_at_once(verify: Verify) -> None:
    """Every deterministic stage runs: a medical query with a fabricated citation fails both."""
    result = verify(
        member="lingzhi", type="fact", content="调息可以治愈焦虑", evidence_ids=["kb:qg-404"]
    )
    assert result.decision == "rejected"
    assert {"boundary.medical", "evidence.cited_ids_exist"} <= set(result.failed_codes)


COMMUNICATED_FORECASTS = [
    ("lingflow", "v0.18 下周一一定会发布", "fallback"),  # a member's own forecast, posted as fact
    ("lingflow", "v0.18 will definitely ship next Monday", "fallback"),
    ("lingyi", "灵通说v0.17的发布暂缓，一定会等待安全评审", "approved"),  # quoting 灵通's own words
    ("lingflow", "【推演】v0.18 下周一可能发布", "approved"),
]


@pytest.mark.parametrize(("member", "content", "decision"), COMMUNICATED_FORECASTS)
def test_council_posts_need_inference_labels_but_quotes_do_not(
    verify: Verify, member: str, content: str, decision: str
) -> None:
    """A member's own forecast in a council message needs a label; a faithful quote does not."""
    result = verify(member=member, type="communication", content=content)
    assert result.decision == decision, result.reason


def test_the_three_worked_examples_of_the_design(verify: Verify) -> None:
    """气功的修炼方法 is approved; a commit to a missing repo is rejected; 灵通说… follows the record."""
    search_qigong = verify(
        member="lingzhi",
        type="action",
        content="搜索知识库：气功的修炼方法",
        tool_call=search("气功的修炼方法"),
    )
    assert search_qigong.decision == "approved"
    commit = verify(
        member="lingflow",
        type="action",
        content="提交",
        tool_call={
            "name": "git_commit",
            "arguments": {"repo_path": "no/such/repo", "message": "fix: y"},
        },
    )
    assert commit.decision == "rejected" and "tool.path_allowed" in commit.failed_codes
    said = verify(member="lingyi", type="communication", content="灵通说v0.16审计已经完成")
    assert said.decision == "approved"  # m-1 on the fixture's council record


def test_claim_rejected_when_the_member_never_said_it(policies: PolicySet, ledger: Ledger) -> None:
    """The same 灵通说v0.16审计已经完成 is rejected against an empty council record."""
    layer = ConstraintLayer(policies, MemoryCouncil(), language="zh")
    result = layer.verify(
        Assertion(member="lingyi", type="communication", content="灵通说v0.16审计已经完成"), ledger
    )
    assert result.decision == "rejected" and result.failed_codes == ["communication.on_record"]
    assert "灵通" in result.reason
