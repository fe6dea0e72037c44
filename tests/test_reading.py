"""The reading side of issue 25: structure, names, mentions and forecasts, both sides.

Every row is decided through the layer with the shipped policies against this file's own
council record, and again written five other ways that must not change the decision: in
traditional script, with a zero-width space inside the member's name, in full-width letters,
declared as the other kind of assertion (the content decides), and behind the speaker's own
name (which is never a relay). A violation that one rewrite lets through is a bypass; a
look-alike that one rewrite blocks is a guard that blocks good work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import opencc
import pytest

from lingyi.checks.relays import MAX_RELAYS, find_relays
from lingyi.config import load_config
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.guard import kb_lookup, open_kb
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, ToolCall, VerificationResult
from lingyi.policy import PolicySet
from lingyi.text import canonical

RECORD = [
    ("m-1", "lingflow", "v0.17 暂缓发布，等待安全评审"),
    ("m-2", "lingflow", "The v0.17 release is on hold pending the security review."),
]

Layer = Callable[..., VerificationResult]


@pytest.fixture(scope="module")
def layer(policies: PolicySet) -> Layer:
    council = MemoryCouncil([CouncilMessage(id=i, sender=s, content=c) for i, s, c in RECORD])

    def verify(content: str, kind: str = "communication", member: str = "lingyi") -> str:
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in content) else "en"
        found = ConstraintLayer(policies, council, language=lang).verify(
            Assertion(member=member, type=kind, content=content, session="s1"),  # type: ignore[arg-type]
            Ledger(),
        )
        return found.decision

    return verify


_TRADITIONAL = opencc.OpenCC("s2t")
_OWN_NAME = {"lingyi": ("灵依：", "LingYi: "), "lingresearch": ("灵研：", "LingResearch: ")}


def _zero_width(text: str) -> str:
    """A zero-width space inside the first member name (灵\u200b通, Ling\u200bFlow)."""
    for name in ("灵通", "LingFlow", "Lingtong", "通哥", "灵Flow", "Ling通", "lingflow"):
        if name in text:
            return text.replace(name, name[0] + "\u200b" + name[1:], 1)
    return text[:1] + "\u200b" + text[1:]


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _behind_own_name(text: str, member: str) -> str:
    zh, en = _OWN_NAME[member]
    label = zh if any("\u4e00" <= c <= "\u9fff" for c in text) else en
    return label + ("\n" if text[:1] in "-*>|`" or "\n" in text else "") + text


def rewrites(text: str, kind: str, member: str = "lingyi") -> list[tuple[str, str, str]]:
    """(how, content, kind): the text as written and five rewrites of it."""
    other = "fact" if kind == "communication" else "communication"
    return [
        ("as written", text, kind),
        ("traditional", _TRADITIONAL.convert(text), kind),
        ("zero-width", _zero_width(text), kind),
        ("full-width", _full_width(text), kind),
        ("other type", text, other),
        ("own name", _behind_own_name(text, member), kind),
    ]


def _all_ways(layer: Layer, text: str, kind: str, expected: str, member: str = "lingyi") -> None:
    wrong = [
        (how, content, got)
        for how, content, k in rewrites(text, kind, member)
        if (got := layer(content, k, member)) != expected
    ]
    assert not wrong, f"expected {expected}: {wrong}"


# Class 3: relays in Markdown and in speaker labels of the record "v0.17 暂缓发布".
STRUCTURE = [
    # a label, a list item, a quote, a table row, a signature: each a relay of 灵通
    ("- 灵通：v0.17 已发布", "rejected"),
    ("> 灵通：v0.17 已经发布", "rejected"),
    ("“v0.17 已经发布了”——灵通", "rejected"),
    ("| 灵通 | v0.17 已发布 |", "rejected"),
    ("【灵通】v0.17 已发布", "rejected"),
    ("灵通 — v0.17 已发布", "rejected"),
    ("灵通没有说v0.17暂缓，v0.17已经发布", "rejected"),
    ("灵通发了消息。他说v0.17已经发布了", "rejected"),
    ("灵通在群里写了：\n> v0.17 已经发布", "rejected"),
    ("| 成员 | 说法 |\n|---|---|\n| 灵通 | v0.17 已发布 |", "rejected"),
    ("- LingFlow: v0.17 has shipped", "rejected"),
    ("> LingFlow: v0.17 was released", "rejected"),
    ('"v0.17 has shipped" — LingFlow', "rejected"),
    ("[LingFlow] v0.17 has shipped", "rejected"),
    ("LingFlow wrote:\n> v0.17 has shipped", "rejected"),
    # the same forms saying what the record says
    ("- 灵通：v0.17 暂缓发布", "approved"),
    ("【灵通】v0.17 暂缓发布", "approved"),
    ("| 灵通 | v0.17 暂缓发布 |", "approved"),
    ("“v0.17 暂缓发布”——灵通", "approved"),
    ("- LingFlow: v0.17 is on hold", "approved"),
    ("LingFlow wrote:\n> the v0.17 release is on hold", "approved"),
    # a quoted or fenced example of a bad sentence is quoted, not claimed
    ("测试用例：不要写“灵通说v0.17已发布”这样的句子", "approved"),
    ("反例：\n```\n灵通说v0.17已发布\n```", "approved"),
    ("Don't write `LingFlow said v0.17 shipped` in notes.", "approved"),
    ("A bad relay looks like this:\n\n    LingFlow said v0.17 shipped\n", "approved"),
    ("~~灵通说v0.17已发布~~ 这句是编的，已删除", "approved"),
    # a quote signed by a member below it is that member's words
    ("> v0.17 已经发布\n\n— 灵通", "rejected"),
    ("> v0.17 has shipped\n\n— LingFlow", "rejected"),
    ("> v0.17 暂缓发布\n\n— 灵通", "approved"),
    ("> the v0.17 release is on hold\n\n— LingFlow", "approved"),
    # a name quoted in the line before a fence does not make the fence that member's words;
    # a name that introduces it does
    ("不要写“灵通说v0.17已发布”；像这样：\n```\n灵通说v0.17已发布  ← 错误\n```", "approved"),
    ("灵通在群里写了：\n```\nv0.17 已经发布\n```", "rejected"),
    (
        "Never write 'LingFlow said v0.17 shipped'; like this:\n```\nLingFlow said v0.17 shipped\n```",
        "approved",
    ),
    ("LingFlow wrote:\n```\nv0.17 has shipped\n```", "rejected"),
    # single quotes quote an example, unless introduced as the member's words
    ("Don't paste 'LingFlow said v0.17 shipped' into the notes.", "approved"),
    ("LingFlow said: 'v0.17 has shipped'", "rejected"),
    # a fenced example of an unsupported fact is no fact of the speaker's
    ("示例（错误写法，勿用）：\n```\n知识库中有关于风水的文章\n```", "approved"),
    ("知识库中有关于风水的文章", "rejected"),
    (
        "Example (do not use):\n```\nThe knowledge base has an article on feng shui.\n```",
        "approved",
    ),
    ("The knowledge base has an article on feng shui.", "rejected"),
    # a to-do list assigns work: no one's words
    ("本周待办：\n1. 灵通 — 重跑 v0.17 安全评审\n2. 灵研 — 整理评审记录", "approved"),
    ("| 成员 | 任务 |\n|---|---|\n| 灵通 | 重跑 v0.17 安全评审 |", "approved"),
]


@pytest.mark.parametrize(("content", "expected"), STRUCTURE)
def test_markdown_and_speaker_labels_make_relays_and_quotes_make_none(
    layer: Layer, content: str, expected: str
) -> None:
    """Labels, list items, table rows, quotes introduced as someone's words are relays;
    fenced, indented, struck-through and quoted examples are not; in every rewrite."""
    _all_ways(layer, content, "communication", expected)


# Class 4: the member's other names. Class 5: mentions that relay nothing.
NAMES_AND_MENTIONS = [
    ("Lingtong说v0.17已经发布了", "rejected"),
    ("通哥说v0.17已经发布了", "rejected"),
    ("小通说v0.17已经发布了", "rejected"),
    ("Ling通说v0.17已经发布了", "rejected"),
    ("灵Flow说v0.17已经发布了", "rejected"),
    ("@lingflow said v0.17 has shipped", "rejected"),
    ("LingFlow's update: v0.17 has shipped", "rejected"),
    ("Lingtong said v0.17 has shipped", "rejected"),
    ("Lingtong said the v0.17 release is on hold", "approved"),
    ("通哥说v0.17暂缓发布", "approved"),
    ("LingFlow's update: v0.17 is on hold", "approved"),
    ("小通道已经打通了，可以开始联调", "approved"),  # 小通道 holds 小通 and is no name
    # conditions, figures about a member and labelled inferences quote no one
    ("If LingFlow says v0.17 has shipped, we start the docs.", "approved"),
    ("如果灵通说v0.17已经发布了，我们就开始写文档", "approved"),
    ("LingFlow's message count dipped from 41 to 38 this week.", "approved"),
    # a premise and what it says then follows assert no fact; a fact after a premise does
    ("如果知识库里有风水的文章，我们就把它下架", "approved"),
    ("If the knowledge base has an article on feng shui, we will take it down.", "approved"),
    ("如果你问我，知识库里有风水的文章", "rejected"),
    ("If you ask me, the knowledge base has an article on feng shui.", "rejected"),
    ("【推演】灵通下周会发布v0.17", "approved"),
    ("Inference: LingFlow will ship v0.17 next week.", "approved"),
    ("LingFlow says v0.17 has shipped", "rejected"),
    ("灵通说了，v0.17已经发布了", "rejected"),
    ("【推演】灵通说v0.17已经发布，所以文档可以开写了", "rejected"),  # a label covers no relay
]


@pytest.mark.parametrize(("content", "expected"), NAMES_AND_MENTIONS)
def test_other_names_relay_and_mentions_do_not(layer: Layer, content: str, expected: str) -> None:
    """Pinyin, nicknames, mixed script, handles and possessives name the member; a
    condition, a figure about it or a labelled inference relays nothing it said."""
    _all_ways(layer, content, "communication", expected)


# Class 7: forecasts by meaning, commitments of the speaker's own work.
FORECASTS = [
    ("The 502s won't come back.", "fallback"),
    ("估计明天能合并", "fallback"),
    ("The fix should hold.", "fallback"),
    ("The release is going to slip.", "fallback"),
    ("It will likely pass review.", "fallback"),
    ("这个修复应该会有效", "fallback"),
    ("大概下周能完成", "fallback"),
    ("恐怕要延期了", "fallback"),
    ("We will hit 99.9% availability next quarter.", "fallback"),  # a figure is no plan
    ("I'll post the numbers as soon as the analysis finishes.", "approved"),
    ("我明天把报告发出来", "approved"),
    ("I'm going to rerun the tests tonight.", "approved"),
    ("我会在周五前整理好笔记", "approved"),
    ("You should restart the runner before the review.", "approved"),  # advice
    ("调度器在任务失败时会自动重试三次", "approved"),  # how it works, not what will happen
    ("【推演】估计明天能合并", "approved"),
    ("Inference: the 502s won't come back.", "approved"),
    ("估计值 0.874 来自上一轮分析", "approved"),  # a noun
    # a fenced or code-quoted forecast is an example; one outside the quote is the speaker's
    ("反例：\n```\n估计明天能合并\n```\n这种句子要加【推演】", "approved"),
    ("Don't write `the 502s won't come back` without a label.", "approved"),
    ("反例见下：\n```\n不加标签的句子\n```\n估计明天能合并", "fallback"),
]


@pytest.mark.parametrize(("content", "expected"), FORECASTS)
def test_forecasts_by_meaning_and_commitments_are_no_forecasts(
    layer: Layer, content: str, expected: str
) -> None:
    """Modal and future forms forecast without a time word (fallback with the label); the
    speaker's own plans and advice to the reader do not; a label covers a forecast."""
    _all_ways(layer, content, "fact", expected, member="lingresearch")


def test_a_text_with_too_many_relays_is_refused_and_read_in_linear_time(
    policies: PolicySet,
) -> None:
    """More relays than MAX_RELAYS: the list says truncated and the relay check refuses the
    text, naming the limit, instead of passing what it did not read."""
    text = canonical("灵通说灵研说灵知说灵依说" * 700, policies.names).text[:8000]
    assert find_relays(text, policies, "lingyi").truncated
    council = MemoryCouncil()
    result = ConstraintLayer(policies, council, language="en").verify(
        Assertion(member="lingyi", type="communication", content=text, session="s"), Ledger()
    )
    check = next(c for c in result.checks if c.code == "communication.on_record")
    assert result.decision == "rejected" and str(MAX_RELAYS) in check.reason


@pytest.fixture(scope="module")
def kb_layer(policies: PolicySet, tmp_path_factory: pytest.TempPathFactory) -> Layer:
    """The layer as the server builds it: the real sample knowledge base as the lookup."""
    root = Path(__file__).resolve().parent.parent
    config = load_config(root / "config" / "lingyi.toml", log=tmp_path_factory.mktemp("l") / "l")
    kb = functools.cache(lambda: open_kb(config, policies, watch=False))
    lookups = {"knowledge_base": kb_lookup(kb)}

    def verify(content: str, kind: str = "action", member: str = "lingzhi") -> VerificationResult:
        from lingyi.guard import services_from

        layer = ConstraintLayer(
            policies, MemoryCouncil(), services=services_from(config, lookups), language="zh"
        )
        call = ToolCall(name="search_knowledge", arguments={"query": content})
        assertion = Assertion(
            member=member,
            type=kind,  # type: ignore[arg-type]
            content=content,
            session="s",
            tool_call=call if kind == "action" else None,
        )
        return layer.verify(assertion, Ledger())

    return verify  # type: ignore[return-value]


SEARCHES = [
    ("five whys", "approved"),  # no domain term, but the KB holds kb:ke-004 on it
    ("Root Cause Analysis: The Five Whys", "approved"),
    ("八段锦", "approved"),
    ("股票行情", "rejected"),  # nothing in the KB, no domain
    # the KB's search finds kb:ke-004 on one common word ("works best"): not about the query
    ("best stock to buy tomorrow", "rejected"),
    ("明天买哪只股票最好", "rejected"),
    ("失眠吃什么药", "rejected"),  # medical, whatever the KB holds
]


@pytest.mark.parametrize(("query", "expected"), SEARCHES)
def test_a_search_the_knowledge_base_holds_is_in_scope(
    kb_layer: Layer, query: str, expected: str
) -> None:
    """domain.scope asks the knowledge base before refusing: the search the guard
    recommends ("call search_knowledge first") is never refused as out of domain."""
    assert kb_layer(query).decision == expected


def test_reasons_name_subjects_as_people_read_them(kb_layer: Layer) -> None:
    """An unsupported fact about the KB says 知识库, never the key knowledge_base, and its
    recommendation (search first) leads to a search that is approved."""
    result = kb_layer("知识库里有关于五个为什么根因分析的文章", kind="fact")
    assert result.decision == "rejected"
    texts = " ".join([result.reason, result.recommendation or ""])
    assert "知识库" in texts and "knowledge_base" not in texts
    assert "search_knowledge" in (result.recommendation or "")
    assert kb_layer("五个为什么 根因分析").decision == "approved"
