"""Facts agree with their evidence: evidence.subject_supported, on what a text is and says.

What a text IS decides whether it states a fact: a question, a request, a hedged clause, the
speaker's own plan, a task list, a non-member's words assert nothing; a fact stays a fact
whatever the declared type, behind a lead-in, a vocative or a negated label. A stated fact
must agree with the evidence it rests on: numbers, versions, identifiers, titles and names
must be in it, counts must match, a labelled value must be its label's, a comparison must
keep the recorded order, "no findings" must not meet listed findings. Evidence that neither
confirms nor contradicts makes the check uncertain. Both sides, Chinese and English.
"""

from __future__ import annotations

import pytest

from lingyi.models import Evidence
from lingyi.policy import PolicySet
from tests._evidence_world import check, verify, world_layer, world_ledger

CODE = "evidence.subject_supported"

NOT_FACTS = [
    # (member, content): in w2, where no tool ran, none of these may be held to evidence
    ("lingzhi", "知识库里收录了《道德经》的英译本吗？"),
    ("lingzhi", "知识库有没有关于五禽戏的条目"),
    ("lingzhi", "Is there a KB entry on the Five Animal Frolics?"),
    ("lingresearch", "Does the loans_2025 dataset have a column for due dates"),
    ("lingzhi", "请在知识库里搜一下《坛经》"),
    ("lingzhi", "Search the KB for commentaries on the Platform Sutra."),
    ("lingyi", "帮我统计 loans_2025 的行数"),
    ("lingzhi", "去知识库里查一下有几篇讲八卦掌的"),
    ("lingzhi", "知识库里也许有一篇讲华佗的文章"),
    ("lingresearch", "The dataset probably has about 8,000 rows."),
    ("lingzhi", "The KB might list two translations of the Lotus Sutra."),
    ("lingzhi", "我正在核对知识库里的《传习录》条目"),
    ("lingzhi", "I'm re-indexing the KB this afternoon."),
    ("lingflow", "下午我会检查一下 v2.3 的审计报告"),
    ("lingresearch", "After lunch I'll rerun the survey analysis on 640 responses."),
    ("lingflow", "The v2.5 audit is scheduled for Thursday."),
    ("lingyi", "To-do: 灵研 — count the rows of loans_2025; 灵知 — tag the KB entries."),
    ("lingyi", "My editor said the KB needs a better index."),
    ("lingyi", "用户说知识库里的链接都失效了"),
    ("lingzhi", "The KB should hold the full Daodejing."),
    ("lingyi", "检索：知识库里讲庄子的文章"),
    ("lingzhi", "【推演】照这个速度，知识库下个月会有五百个条目"),
    # a roster; an assignment; a preference; a command
    ("lingyi", "本周值班：灵研（数据集）、灵知（知识库）。"),
    ("lingyi", "Assigning to LingResearch: recount the rows of loans_2025."),
    ("lingresearch", "I'd rather re-check the loans_2025 schema before anyone trusts its rows."),
    ("lingresearch", "读取 loans_2025 数据集"),  # what a tool call does, said as a command
]


@pytest.mark.parametrize(("member", "content"), NOT_FACTS)
def test_what_asserts_no_fact_needs_no_evidence(
    policies: PolicySet, member: str, content: str
) -> None:
    """Questions, requests, hedges, plans, task lists, others' words and labelled
    inferences pass, in a session with no evidence at all."""
    result = verify(world_layer(policies), world_ledger(), content, member=member, session="w2")
    assert check(result, CODE).passed, check(result, CODE).reason


FACTS = [
    # (member, content): facts, however phrased, with no evidence in w2
    ("lingzhi", "知识库里收录了《道德经》的英译本。"),
    ("lingresearch", "The loans_2025 dataset has 8,000 rows."),
    ("lingzhi", "知识库里没有可能没有五禽戏的条目"),  # 没有可能 is no hedge
    ("lingzhi", "In May the KB held 300 entries."),  # the month, no hedge
    ("lingflow", "The audit report says there were no high findings."),  # a document speaks
    ("lingzhi", "检索结果显示知识库里有三篇讲庄子的文章"),  # results are reported
    ("lingzhi", "I'm confirming that the KB has a guide to the Qiwulun."),
    ("lingzhi", "我在知识库里找到了两篇庖丁解牛的文章"),
    ("lingyi", "灵通，知识库里有三篇讲八卦掌的文章"),  # said to a member, still a fact
    ("lingresearch", "The experiment could not reproduce the gap."),  # could not: no hedge
    ("lingresearch", "Quick update: loans_2025 has 8,000 rows."),
    ("lingresearch", "这不是推演：数据集有 9,000 行"),
    ("lingzhi", "知識庫裡有《莊子·秋水》的導讀"),  # traditional script
    ("lingzhi", "ＫＢ 里有《庄子·秋水》的导读"),  # full width
    ("lingzhi", "The K\u200bB has a guide to Autumn Floods."),  # zero width
    ("lingzhi", "The \u039aB has a guide to Autumn Floods."),  # a Greek capital kappa
    ("lingzhi", "&#30693;&#35782;&#24211;里有《庄子·秋水》的导读"),  # HTML entities
    ("lingyi", "灵 知的知识库里有《庄子·秋水》的导读"),  # a name spaced out
    # a task-list lead-in covers its own sentence only: a fact on the next line is a fact
    ("lingyi", "待办：\n知识库里有《庄子·秋水》的导读"),
    ("lingresearch", "Tasks: done. The loans_2025 dataset has 8,000 rows."),
]


@pytest.mark.parametrize(("member", "content"), FACTS)
@pytest.mark.parametrize("kind", ["fact", "communication", "action"])
def test_a_fact_needs_evidence_whatever_it_is_sent_as(
    policies: PolicySet, member: str, content: str, kind: str
) -> None:
    """The declared type, the script, the spelling and the wording do not exempt a fact."""
    ledger = world_ledger()
    result = verify(world_layer(policies), ledger, content, member=member, session="w2", kind=kind)
    assert not check(result, CODE).passed, content
    assert result.decision == "rejected"


AGREES = [
    # (member, content, cited) in w1
    ("lingzhi", "知识库里的《庄子·齐物论》导读说全篇约两千字", []),
    ("lingzhi", "知识库里有《庄子·齐物论》导读和庖丁解牛两篇", []),
    ("lingzhi", "The KB holds the Diamond Sutra in Kumarajiva's translation of 402 CE.", []),
    ("lingzhi", "知识库收录了鸠摩罗什 402 年译出的《金刚经》", []),  # names across languages
    ("lingzhi", "知識庫裡有《莊子·齊物論》導讀", []),
    ("lingresearch", "Survey cohort B's satisfaction was 4.6, ahead of cohort A at 4.1.", []),
    ("lingresearch", "问卷中 B 组满意度 4.6，高于 A 组的 4.1，p=0.002", []),
    ("lingresearch", "lingzhi 和 lingflow 六月一共发了 1,267 条消息", []),  # a total
    ("lingresearch", "问卷里 B 组满意度比 A 组高 0.5", []),  # a gap
    ("lingresearch", "loans_2025 has 8,350 rows.", []),
    ("lingresearch", "六月 lingzhi 发了 812 条消息，lingflow 发了 455 条", []),
    ("lingflow", "v2.3 审计只发现 3 个低危问题，没有高危问题", []),
    ("lingflow", "The v2.3 audit found three low findings and none medium.", []),
    ("lingflow", "search-api 的 p95 延迟是 840 毫秒", []),
    ("lingresearch", "B 组满意度 4.6（an-77）", []),
    ("lingresearch", "Cohort B scored 4.6.", ["an-77"]),
]


@pytest.mark.parametrize(("member", "content", "cited"), AGREES)
def test_facts_that_agree_with_their_evidence_pass(
    policies: PolicySet, member: str, content: str, cited: list[str]
) -> None:
    """Stated numbers, names, counts, labelled values, orders and findings match the record."""
    result = verify(world_layer(policies), world_ledger(), content, member=member, cited=cited)
    assert check(result, CODE).passed, check(result, CODE).reason
    assert not check(result, CODE).uncertain


CONTRADICTS = [
    # (member, content, cited, what the reason names)
    ("lingzhi", "知识库里的《庄子·齐物论》导读说全篇约三千字", [], "3000"),
    ("lingzhi", "知识库里有《庄子·齐物论》《庄子·秋水》两篇导读", [], "秋水"),
    ("lingzhi", "Xuanzang made the Diamond Sutra rendering the KB keeps.", [], "xuanzang"),
    ("lingzhi", "知识库里有一篇讲庄周梦蝶和五禽戏的文章", [], "wuqinxi"),
    ("lingzhi", "知识库里有三篇讲庄子的文章", [], "3"),
    (
        "lingresearch",
        "Cohort A's satisfaction beat cohort B's, with 640 responses each.",
        [],
        "4.1",
    ),
    ("lingresearch", "问卷中 A 组满意度 4.6", [], "4.6"),
    ("lingresearch", "六月 lingflow 发了 812 条消息", [], "812"),
    ("lingresearch", "loans_2026 has 8,350 rows.", [], "loans_2026"),
    ("lingresearch", "The survey covered 2,000 responses per cohort.", [], "2,000"),
    ("lingflow", "v2.3 审计没有发现任何问题", [], "3"),
    ("lingflow", "The v2.3 audit found 2 high findings.", [], "2"),
    ("lingflow", "v2.4 的审计发现 3 个低危问题", [], "2.4"),
    ("lingflow", "search-api 的 p95 延迟是 1.2 秒", [], "1.2"),
    ("lingresearch", "B 组满意度 4.9（an-77）", [], "4.9"),
    ("lingresearch", "Cohort A scored 4.6.", ["an-77"], "4.6"),
]


@pytest.mark.parametrize(("member", "content", "cited", "named"), CONTRADICTS)
def test_facts_that_contradict_their_evidence_are_rejected(
    policies: PolicySet, member: str, content: str, cited: list[str], named: str
) -> None:
    """Related evidence is not supporting evidence: what the fact states differs from it."""
    result = verify(world_layer(policies), world_ledger(), content, member=member, cited=cited)
    found = check(result, CODE)
    assert not found.passed and not found.uncertain, found.reason
    assert named in found.reason and result.decision == "rejected"


UNSURE = [
    ("lingflow", "search-api 的 p95 延迟是 840 毫秒，根因是内存泄漏"),
    ("lingzhi", "The KB's Qiwulun guide follows the reading of Chen Guying."),
    ("lingzhi", "知识库里有一篇讲站桩要领的文章（an-77）"),  # cites what shares nothing with it
]


@pytest.mark.parametrize(("member", "content"), UNSURE)
def test_related_evidence_that_neither_confirms_nor_contradicts_is_uncertain(
    policies: PolicySet, member: str, content: str
) -> None:
    """Uncertain, with what was found; the shipped on_uncertain is "judge", and with no judge
    the layer's judge_unavailable (pass) settles it, recorded as degraded."""
    result = verify(world_layer(policies), world_ledger(), content, member=member)
    found = check(result, CODE)
    assert found.uncertain and found.detail["evidence"], found.reason
    assert found.passed and found.degraded and result.decision == "approved"


NAMED_ONLY = [
    ("《庄子·齐物论》全篇约三千字", False),  # the recorded guide counts 两千字
    ("《庄子·齐物论》全篇约两千字", True),
    ("《庄子·齐物论》成书于战国时期", True),  # nothing the evidence says otherwise
    ("《庄子·齐物论》约有 40 段", True),  # the evidence counts no 段
]


@pytest.mark.parametrize(("content", "passes"), NAMED_ONLY)
def test_a_fact_naming_recorded_evidence_must_not_contradict_it(
    policies: PolicySet, content: str, passes: bool
) -> None:
    """Without a subject marker, a fact about a title the session's evidence holds fails only
    on a contradiction (the same unit counted differently), not for being unrecorded."""
    result = verify(world_layer(policies), world_ledger(), content, member="lingzhi")
    assert check(result, CODE).passed is passes, check(result, CODE).reason


@pytest.mark.parametrize(("count", "passes"), [(7, True), (8, False)])
def test_a_count_of_documents_is_what_the_session_found(
    policies: PolicySet, count: int, passes: bool
) -> None:
    """Seven recorded guides to the Heart Sutra back "七篇", however many a comparison
    usually looks at; eight do not."""
    ledger = world_ledger()
    guides = [Evidence(id=f"kb:hs-{i}", title=f"心经讲记之{i}") for i in range(7)]
    ledger.record("w1", "lingzhi", "search_knowledge", {"query": "心经"}, guides)
    numeral = {7: "七", 8: "八"}[count]
    result = verify(
        world_layer(policies), ledger, f"知识库里有{numeral}篇讲《心经》的文章", member="lingzhi"
    )
    assert check(result, CODE).passed is passes, check(result, CODE).reason


def test_relayed_words_are_not_the_speakers_facts(policies: PolicySet) -> None:
    """A relay is checked against the council record, not against session evidence."""
    content = "LingResearch said the June survey report is ready, and loans_2025 has 8,350 rows."
    result = verify(world_layer(policies), world_ledger(), content, member="lingyi", session="w2")
    assert check(result, CODE).passed
