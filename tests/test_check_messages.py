"""The checks speak through the message catalog, in the configured language.

The catalog (``src/lingyi/messages/{zh,en}.toml``) holds every reason, recommendation and
fallback note a check writes, keyed by check code and message name. These tests pin that
both languages hold the same messages, that each language's wording reaches the results,
and that no result ever shows a bare key or an unfilled placeholder.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from string import Formatter
from typing import Any

import pytest

from lingyi import messages
from lingyi.checks.communication import compare
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, VerificationResult
from lingyi.policy import PolicySet, load_policies
from tests import test_decisions as tables
from tests.conftest import SHIPPED_POLICIES

VerifyIn = Callable[..., VerificationResult]


@pytest.fixture
def verify_in(policies: PolicySet, council: MemoryCouncil, ledger: Ledger) -> VerifyIn:
    """Verify one assertion in session s1, with the layer configured in ``lang``."""

    def run(lang: str, **fields: Any) -> VerificationResult:
        fields.setdefault("session", "s1")
        layer = ConstraintLayer(policies, council, language=lang)
        return layer.verify(Assertion.model_validate(fields), ledger)

    return run


def test_both_catalogs_hold_the_same_messages() -> None:
    """A message in one language exists in the other, and every template is well formed.

    The values a template uses may differ: Chinese names a member 灵通, English lingflow.
    """
    zh, en = messages.catalog("zh"), messages.catalog("en")
    assert sorted(set(zh) ^ set(en)) == []
    for template in [*zh.values(), *en.values()]:
        list(Formatter().parse(template))  # raises on an unbalanced brace


def search(query: str) -> dict[str, Any]:
    return {"name": "search_knowledge", "arguments": {"query": query}}


def _fact(content: str, **more: Any) -> dict[str, Any]:
    return {"member": "lingresearch", "type": "fact", "content": content, **more}


def _said(content: str) -> dict[str, Any]:
    return {"member": "lingyi", "type": "communication", "content": content}


def _query(query: str) -> dict[str, Any]:
    return {"member": "lingzhi", "type": "action", "content": "检索", "tool_call": search(query)}


# (language, assertion, check code, where the text is, a part of the expected text)
WORDING = [
    ("zh", _fact(""), "pre.content", "reason", "断言内容为空"),
    ("en", _fact(""), "pre.content", "reason", "the assertion has no content"),
    ("zh", _fact("x" * 4001), "pre.content", "reason", "内容过长（4001 字符，上限 4000）"),
    ("en", _fact("x" * 4001), "pre.content", "reason", "(4001 characters, limit 4000)"),
    (
        "zh",
        {"member": "lingflow", "type": "action", "content": "推送"},
        "pre.action_has_tool",
        "recommendation",
        "请在 tool_call 中给出工具，可用：",
    ),
    (
        "en",
        {"member": "lingflow", "type": "action", "content": "push"},
        "pre.action_has_tool",
        "recommendation",
        "set tool_call to one of: ",
    ),
    # 灵知's referral is its policy's own wording; the reason is the catalog's.
    ("zh", _query("失眠吃什么药"), "boundary.medical", "reason", "越界：医疗建议（“吃什么药”）"),
    ("zh", _query("失眠吃什么药"), "boundary.medical", "recommendation", "灵知只提供文化与历史"),
    ("en", _query("what medicine should I take"), "boundary.medical", "reason", "medical advice"),
    (
        "en",
        _query("what medicine should I take"),
        "boundary.medical",
        "recommendation",
        "this member only covers cultural and historical knowledge",
    ),
    ("zh", _query("best pizza in town"), "domain.scope", "recommendation", "领域：儒、释、道"),
    ("en", _query("best pizza in town"), "domain.scope", "recommendation", "one of: 儒, 释, 道"),
    ("zh", _query("best pizza in town"), "domain.scope", "note", "在允许的领域内检索"),
    ("en", _query("best pizza in town"), "domain.scope", "note", "search restricted to the"),
    ("zh", _query("太极拳的基本套路"), "domain.scope", "reason", "属于领域：武"),
    ("en", _query("太极拳的基本套路"), "domain.scope", "reason", "in scope: 武"),
    # The closest record's reason is in the configured language too.
    (
        "zh",
        _said("灵通说v0.15审计已经完成"),
        "communication.on_record",
        "reason",
        "灵通 的记录中没有相符的消息（最接近的 m-1：版本或编号不符：转述为 0.15，记录为 0.16）",
    ),
    (
        "en",
        _said("LingFlow said the v0.15 audit is done"),
        "communication.on_record",
        "reason",
        "no message from lingflow matches (closest m-1: version differs: claim 0.15, record 0.16)",
    ),
    (
        "zh",
        _said("灵知说知识库迁移已经完成"),
        "communication.on_record",
        "reason",
        "状态与记录矛盾：转述为已完成，记录为尚未开始",
    ),
    (
        "en",
        _said("LingZhi says the knowledge base migration is done"),
        "communication.on_record",
        "reason",
        "status contradicts the record: claim done, record not started",
    ),
    (
        "zh",
        _said("灵通说v0.16审计已经完成"),
        "communication.on_record",
        "reason",
        "与 灵通 的记录 m-1 一致",
    ),
    (
        "en",
        _said("灵通说v0.16审计已经完成"),
        "communication.on_record",
        "reason",
        "matches lingflow's record m-1",
    ),
    (
        "zh",
        _said("灵通说v0.15审计已经完成"),
        "communication.on_record",
        "recommendation",
        "请先查阅 灵通（lingflow）在议会记录中的消息",
    ),
    # The label follows the content's language; the message follows the configured one.
    ("zh", _fact("灵通下周一会上线新版本"), "inference.labelled", "recommendation", "“【推演】”"),
    (
        "zh",
        _fact("It will ship next Monday."),
        "inference.labelled",
        "recommendation",
        "“Inference:”",
    ),
    ("en", _fact("灵通下周一会上线新版本"), "inference.labelled", "recommendation", '"【推演】"'),
    ("zh", _fact("灵通下周一会上线新版本"), "inference.labelled", "note", "已加推演标注"),
    (
        "en",
        _fact("It will ship next Monday."),
        "inference.labelled",
        "note",
        "labelled as inference",
    ),
    (
        "zh",
        _fact("调息是气功的核心", evidence_ids=["kb:qg-404"]),
        "evidence.cited_ids_exist",
        "reason",
        "引用了本会话中不存在的证据：kb:qg-404",
    ),
    (
        "en",
        _fact("调息是气功的核心", evidence_ids=["kb:qg-404"]),
        "evidence.cited_ids_exist",
        "reason",
        "cited evidence not recorded in this session: kb:qg-404",
    ),
    (
        "zh",
        _fact("trace a3c1e9f0b2d44c6e8f7a1b2c3d4e5f60"),
        "evidence.id_patterns",
        "recommendation",
        "请重新查询链路（query_traces），并逐字引用结果中的 trace id；未找到：a3c1e9f0b2d44c6e8f7a1b2c3d4e5f60",
    ),
    (
        "en",
        _fact("trace a3c1e9f0b2d44c6e8f7a1b2c3d4e5f60"),
        "evidence.id_patterns",
        "recommendation",
        "query the traces again (query_traces) and cite each trace id verbatim from the result; not found: a3c1e9f0b2d44c6e8f7a1b2c3d4e5f60",
    ),
    (
        "zh",
        _fact("实验证明B方案准确率更高", session="s8"),
        "evidence.subject_supported",
        "recommendation",
        "先调用 analyze_data, access_data_source 获取证据",
    ),
    (
        "en",
        _fact("The experiment shows variant B has higher accuracy", session="s8"),
        "evidence.subject_supported",
        "reason",
        "a fact about data and experiments with no related evidence in this session",
    ),
    (
        "zh",
        _fact("见 https://reports.example/an-99"),
        "evidence.urls_recorded",
        "reason",
        "链接不在本会话工具返回的结果中：https://reports.example/an-99",
    ),
    (
        "en",
        _fact("see https://reports.example/an-99"),
        "evidence.urls_recorded",
        "recommendation",
        "cite only URLs that a tool returned",
    ),
]


def _text(check: CheckResult, where: str) -> str:
    if where == "note":
        return check.fallback.note if check.fallback else "None"
    return str(getattr(check, where) or "")


@pytest.mark.parametrize(("lang", "fields", "code", "where", "expected"), WORDING)
def test_check_texts_are_in_the_configured_language(
    verify_in: VerifyIn, lang: str, fields: dict[str, Any], code: str, where: str, expected: str
) -> None:
    """Each check's reason, recommendation and fallback note come from the catalog of ``lang``."""
    result = verify_in(lang, **fields)
    check = next(c for c in result.checks if c.code == code)
    assert expected in _text(check, where), _text(check, where)


def _swept() -> list[dict[str, Any]]:
    """Every assertion of the decision tables, and the wording rows above."""
    rows = [_query(q) for q, _ in tables.BOUNDARY] + [_query(q) for q, *_ in tables.DOMAIN]
    rows += [_said(c) | {"member": m} for m, c, _ in tables.COMMUNICATION]
    rows += [_fact(c, evidence_ids=["an-3"]) for c, _ in tables.INFERENCE]
    rows += [_fact(c, session=s, member=m, evidence_ids=e) for s, m, c, e, *_ in tables.EVIDENCE]
    return rows + [fields for _, fields, *_ in WORDING]


@pytest.mark.parametrize("lang", messages.LANGUAGES)
def test_no_result_shows_a_bare_key_or_an_unfilled_placeholder(
    verify_in: VerifyIn, lang: str
) -> None:
    """A message missing from the catalog would show its key; a value not passed, its {name}."""
    leaks = []
    for fields in _swept():
        for check in verify_in(lang, **fields).checks:
            texts = [check.reason, check.recommendation or "", _text(check, "note")]
            leaks += [(check.code, t) for t in texts if f"{check.code}." in t or "{" in t]
    assert leaks == []


# (claim, record, supported, the message name of the reason)
COMPARED = [
    ("v0.15审计已经完成", "v0.16 审计已完成", False, "version_differs"),
    ("v0.15审计已经完成", "审计已完成", False, "version_absent"),
    ("LingFlow said v0.15 is out", "v0.16 is out", False, "version_differs"),
    ("发布暂缓到7月25日", "发布暂缓到7月15日", False, "date_differs"),
    ("知识库迁移已经完成", "知识库迁移尚未开始", False, "status_differs"),
    ("知识库迁移还没开始", "知识库迁移已完成", False, "status_differs"),
    (
        "v0.16审计已经完成，而且没有发现安全问题",
        "v0.16 审计已完成，报告见 audit-v0.16.md",
        False,
        "clause_missing",
    ),
    ("the dataset was deleted", "the dataset is finished", False, "clause_missing"),
    ("v0.16审计已经完成", "v0.16 审计已完成", True, "same_claim"),
    ("天气很好", "今天天气很好", True, "same_claim"),
    ("天气很好", "会议取消", False, "clause_missing"),
    (
        "数据集v3标注完成了",
        "Dataset v3 labelling is finished: 12,400 samples.",
        True,
        "same_claim",
    ),
    ("审计完成", "The audit is done", True, "same_claim"),  # the glossary: 审计 = audit
    ("审计发现了问题", "The audit found no issues.", False, "negation_differs"),
]


@pytest.mark.parametrize(("claim", "record", "supported", "why"), COMPARED)
def test_a_comparison_says_why_by_message_name(
    claim: str, record: str, supported: bool, why: str
) -> None:
    """compare() returns a message name and its values, which both catalogs can word."""
    match = compare(claim, record)
    assert (match.ok, match.why) == (supported, why)
    for lang in messages.LANGUAGES:
        assert messages.has(lang, f"communication.on_record.{why}")


def test_a_member_without_its_own_referral_gets_the_catalogs(
    tmp_path: Path, council: MemoryCouncil, ledger: Ledger
) -> None:
    """The referral is the policy's wording when it has one, the catalog's generic one otherwise."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    path = folder / "lingzhi.toml"
    text = path.read_text(encoding="utf-8")
    own = re.search(r"\[checks\.params\.referral\].*?\n\n", text, re.DOTALL)
    assert own is not None
    path.write_text(text.replace(own.group(0), ""), encoding="utf-8")
    for lang, expected in [("zh", "请咨询执业医师"), ("en", "consult a licensed physician")]:
        layer = ConstraintLayer(load_policies(folder), council, language=lang)
        result = layer.verify(Assertion.model_validate(_query("失眠吃什么药")), ledger)
        check = next(c for c in result.checks if c.code == "boundary.medical")
        assert check.recommendation == expected
