"""Answers with sources (lingyi.answers): each validation edge, the gate, the retries.

Every check gets a table of hostile rewrites that must still be caught and look-alikes that
must pass, in Chinese and English. The answers are verified by the shipped policies with a
ledger that holds what a search really returned (the real layer, the real kind); the MCP tool,
the CLI and replay are pinned at the end through their real entry points.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lingyi.answers import ANSWER
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence, VerificationResult
from lingyi.policy import PolicySet

KB = "https://kb.example.org"
FOUND = [
    Evidence(id="kb:qg-001", title="气功源流", url=f"{KB}/qg-001"),
    Evidence(id="kb:qg-002", title="气功与呼吸", url=f"{KB}/qg-002"),
    Evidence(id="kb:qg-003", title="八段锦", url=f"{KB}/qg-003"),
    Evidence(id="kb:qg-004", title="太极与导引", url=f"{KB}/qg-004"),
    Evidence(id="kb:img-1", title="导引图", url=f"{KB}/img/daoyin.png"),
    Evidence(id="kb:en-001", title="Breathing in qigong", url=f"{KB}/en/breathing"),
]


def searched(session: str = "s") -> Ledger:
    """A ledger in which search_knowledge returned FOUND in ``session``."""
    ledger = Ledger()
    ledger.record(session, "lingzhi", "search_knowledge", {"query": "气功"}, list(FOUND))
    return ledger


def answer(layer: ConstraintLayer, ledger: Ledger, text: str, **given: Any) -> VerificationResult:
    """Verify an answer as the guard does: the layer decides, then the kind finishes."""
    given = {"member": "lingzhi", "session": "s", "question": "气功的源流是什么", **given}
    assertion = ANSWER.assertion({**given, "answer": text})
    result = layer.verify(assertion, ledger)
    result.outputs = ANSWER.finish(assertion, result, ledger.open(assertion.session))
    return result


@pytest.fixture
def layer(policies: PolicySet) -> ConstraintLayer:
    return ConstraintLayer(policies, MemoryCouncil(), language="zh")


def failed_answer_codes(result: VerificationResult) -> list[str]:
    return sorted(c.code for c in result.checks if not c.passed and c.code.startswith("answer."))


# --- answer.fences -----------------------------------------------------------------------

FENCES = [
    # (answer, caught?) — hostile rewrites first, then look-alikes that must pass
    ("示例：\n```python\nprint('气功')\n", True),  # never closed
    ("````\ncode\n```\n", True),  # closed by a shorter fence
    ("```\ncode\n``` not a close\n", True),  # a closing fence takes no info string
    ("~~~\ncode\n```\n", True),  # closed with the other character
    ("Example:\n```\nx = 1\n\u200b```\n", True),  # an invisible character hides the close
    ("> ```\n> quoted code\n\nafter the quote", True),  # a fence left open in a blockquote
    ("示例：\n```python\nprint('气功')\n```\n", False),
    ("````md\n```\ninner fence\n```\n````\n", False),  # a longer fence holds a shorter one
    ("Type ``` to start a fence.", False),  # mid-line: not a fence
    ("~~~\n```\n~~~\n", False),  # a backtick line inside a tilde fence
    ("    ```\n    indented: a code block, not a fence\n", False),
    ("> ```\n> quoted\n> ```\n", False),
]


@pytest.mark.parametrize(("text", "caught"), FENCES)
def test_code_fences_must_close(layer: ConstraintLayer, text: str, caught: bool) -> None:
    """An unclosed fence (every way of not closing it) is caught; closed ones of any shape pass."""
    result = answer(layer, searched(), text)
    assert ("answer.fences" in failed_answer_codes(result)) is caught, result.reason


# --- answer.links ------------------------------------------------------------------------

LINKS = [
    ("见[气功源流](https://kb.example.org/qg-001", True),  # target never closed
    ("![导引图](https://kb.example.org/img/daoyin.png", True),  # image never closed
    ("[click](javascript:alert(1))", True),  # a target the renderer refuses
    ("see [the source]()", True),  # no target
    ("见[气功源流][ref]，但没有定义", True),  # a reference with no definition
    ("see [the source] (https://kb.example.org/qg-001)", True),  # a space before the target
    ("![导引图]", True),  # an image with no target
    ("见[气功源流](https://kb.example.org/qg-001)。", False),
    ("![导引图](https://kb.example.org/img/daoyin.png)", False),
    ('[Breathing](https://kb.example.org/en/breathing "title")', False),
    ("[Breathing](<https://kb.example.org/en/breathing>)", False),
    ("[气功源流][1]\n\n[1]: https://kb.example.org/qg-001", False),
    ("<https://kb.example.org/qg-001>", False),
    ("数组 a[0][1] 的值", False),  # indexing, not a reference
    ("`[x](` is how a link starts", False),  # code, not a link
    ("[注] 见下文", False),  # a bracket in prose
]


@pytest.mark.parametrize(("text", "caught"), LINKS)
def test_links_and_images_must_parse(layer: ConstraintLayer, text: str, caught: bool) -> None:
    """Link syntax a renderer would show as text is caught; every valid link form passes."""
    result = answer(layer, searched(), text)
    assert ("answer.links" in failed_answer_codes(result)) is caught, result.reason


# --- answer.mermaid ----------------------------------------------------------------------


def mermaid(body: str, close: bool = True) -> str:
    return "流程如下：\n```mermaid\n" + body + ("\n```\n" if close else "\n")


MERMAID = [
    (mermaid("flowchat TD\nA-->B"), True),  # a misspelt type
    (mermaid("diagram\nA-->B"), True),  # an unknown type
    (mermaid(""), True),  # nothing in it
    (mermaid("%% only a comment"), True),  # no type at all
    (mermaid("graph TD\nA-->B", close=False), True),  # never closed
    (mermaid("graph TD"), True),  # a type and nothing to draw
    (mermaid("graph TD\nsubgraph 调息\nA-->B"), True),  # subgraph never ended
    (mermaid("sequenceDiagram\nloop every minute\nA->>B: hi"), True),  # loop never ended
    (mermaid("flowchart LR\nA[开始 --> B"), True),  # a node's bracket left open
    (mermaid("graph TD\nA-->B\nend"), True),  # an end with nothing to end
    (mermaid("graph TD\nA-->B"), False),
    (mermaid("flowchart LR\nsubgraph 调息\nA[吸气] --> B[呼气]\nend"), False),
    (mermaid("sequenceDiagram\nalt ok\nA->>B: yes\nelse no\nA->>B: no\nend"), False),
    (mermaid("%%{init: {'theme': 'dark'}}%%\ngraph TD\nA-->B"), False),
    (mermaid("---\ntitle: 导引\n---\nflowchart TD\nA-->B"), False),
    (mermaid("stateDiagram-v2\n[*] --> 静\n静 --> 动"), False),
    (mermaid('pie title Pets\n"Dogs" : 386\n"Cats" : 85'), False),
    (mermaid('graph TD\nA["a [b"] --> C>asymmetric]'), False),  # brackets in labels
    (mermaid("erDiagram\nCUSTOMER ||--o{ ORDER : places"), False),  # cardinality, not a bracket
    ("Mermaid diagrams are drawn from text.", False),
]


@pytest.mark.parametrize(("text", "caught"), MERMAID)
def test_mermaid_blocks_must_be_complete(layer: ConstraintLayer, text: str, caught: bool) -> None:
    """An unknown type, an empty or unclosed block, an unended block are caught."""
    result = answer(layer, searched(), text)
    assert ("answer.mermaid" in failed_answer_codes(result)) is caught, result.reason


# --- answer.urls_returned ------------------------------------------------------------------

URLS = [
    ("![图](https://kb.example.org/img/other.png)", True),  # an image no tool returned
    ("见[气功源流](https://kb.example.org/qg-009)", True),  # a link no tool returned
    ("[气功源流](https://kb.example.org/qg-001?ref=1)", True),  # a different query
    ("[Breathing](https://kb.ехample.org/en/breathing)", True),  # Cyrillic е and х
    ('<img src="https://evil.example.com/x.png">', True),  # HTML
    ("[t][1]\n\n[1]: https://evil.example.com/", True),  # by reference
    ("See https://evil.example.com/page for more.", True),  # bare
    ("![x](data:image/png;base64,iVBORw0KGgo=)", True),  # inline data, returned by no tool
    ("见[气功源流](https://kb.example.org/qg-001/)", False),  # trailing slash
    ("见[气功源流](https://www.kb.example.org/qg-001)", False),  # www.
    ("[Breathing](HTTPS://KB.EXAMPLE.ORG/en/breathing#intro)", False),  # case, fragment
    ("![导引图](https://kb.example.org/img/daoyin.png)", False),
    ("[气功源流](https：／／kb.example.org/qg-001)", False),  # full-width punctuation
    ("见[下文](#总结)", False),  # an anchor in the answer itself
]


@pytest.mark.parametrize(("text", "caught"), URLS)
def test_cited_urls_and_images_were_returned(
    layer: ConstraintLayer, text: str, caught: bool
) -> None:
    """A URL no tool returned is caught as a link, an image, HTML, a reference or bare text;
    the forms of a returned URL that differ only in spelling pass."""
    result = answer(layer, searched(), text)
    assert ("answer.urls_returned" in failed_answer_codes(result)) is caught, result.reason


# --- answer.catalog_sources ----------------------------------------------------------------

THREE = "".join(f"- [{e.title}]({e.url})\n" for e in FOUND[:3])
FOUR = "".join(f"- [{e.title}]({e.url})\n" for e in FOUND[:4])
CATALOG = [
    # (question, declared intent, answer, caught?)
    ("有哪些关于气功的文章", "catalog", THREE, True),  # three sources refused
    ("有哪些关于气功的文章", "general", THREE, True),  # the question decides, not the label
    ("Which articles are there on qigong?", "general", THREE, True),
    (
        "有哪些关于气功的文章",
        "catalog",
        THREE + f"- [重复]({KB}/qg-001/)\n",
        True,
    ),  # one source twice
    ("有哪些关于气功的文章", "catalog", THREE + "- [别处](https://other.org/a)\n", True),
    ("有哪些关于气功的文章", "catalog", FOUR, False),
    ("List of articles about qigong", "catalog", FOUR, False),
    ("气功的源流是什么", "general", THREE, False),  # not a catalog question
    ("What is the origin of qigong?", "general", f"[Breathing]({KB}/en/breathing)", False),
]


@pytest.mark.parametrize(("question", "intent", "text", "caught"), CATALOG)
def test_catalog_questions_need_enough_distinct_sources(
    layer: ConstraintLayer, question: str, intent: str, text: str, caught: bool
) -> None:
    """A catalog question cites at least four distinct retrieved sources (the policy's
    number); declaring it general does not exempt it; a general question needs none."""
    result = answer(layer, searched(), text, question=question, intent=intent)
    assert ("answer.catalog_sources" in failed_answer_codes(result)) is caught, result.reason
    assert result.outputs["intent"] == ("catalog" if caught or text == FOUR else "general")


# --- the source gate: all four states ----------------------------------------------------------


def test_the_gate_is_closed_without_search_results(layer: ConstraintLayer) -> None:
    """No search results in the session: no sources, gate no_results (an uncited answer may
    still be accepted on its text)."""
    result = answer(layer, Ledger(), "气功源于古代的导引术。")
    assert result.decision == "approved"
    assert (result.outputs["gate"], result.outputs["sources"]) == ("no_results", [])


def test_the_gate_is_closed_when_validation_failed(layer: ConstraintLayer) -> None:
    """A returned URL is cited but a fence is open: rejected, no sources, gate validation."""
    result = answer(layer, searched(), f"[气功源流]({KB}/qg-001)\n```\nopen")
    assert result.decision == "rejected"
    assert (result.outputs["gate"], result.outputs["sources"]) == ("validation", [])
    assert result.outputs["gaps"][0]["code"] == "answer.fences"


def test_the_gate_opens_when_validation_passed_and_no_critic_runs(layer: ConstraintLayer) -> None:
    """Search results, validation passed, no judge configured: the cited sources, as the tool
    returned them (URL and title), each once; the critic is reported skipped."""
    text = f"气功源于导引[气功源流]({KB}/qg-001/)，调息见[气功与呼吸](https://www.kb.example.org/qg-002)和[再见]({KB}/qg-001)。"
    result = answer(layer, searched(), text)
    assert result.decision == "approved" and result.outputs["gate"] == "open"
    assert result.outputs["sources"] == [
        {"url": f"{KB}/qg-001", "title": "气功源流"},
        {"url": f"{KB}/qg-002", "title": "气功与呼吸"},
    ]
    assert result.outputs["critic"] == "skipped" and result.outputs["gates_closed"] == []


def test_images_are_not_listed_as_sources(layer: ConstraintLayer) -> None:
    """An image that a tool returned may be shown, but it is not a source of the answer."""
    text = f"![导引图]({KB}/img/daoyin.png) 见[气功源流]({KB}/qg-001)"
    result = answer(layer, searched(), text)
    assert [s["title"] for s in result.outputs["sources"]] == ["气功源流"]


# --- retry and degrade -----------------------------------------------------------------------


def test_attempts_are_counted_and_the_last_failed_one_is_degraded(layer: ConstraintLayer) -> None:
    """Three attempts per question in a session: the first two failures list their gaps, the
    third is degraded to an answer that cites nothing; a fourth is degraded even if good."""
    ledger, bad = searched(), f"见[气功源流]({KB}/qg-404)"
    first, second = answer(layer, ledger, bad), answer(layer, ledger, bad)
    assert [first.decision, second.decision] == ["rejected", "rejected"]
    assert first.outputs["gaps"][-1]["unknown_urls"] == [f"{KB}/qg-404"]
    assert (second.outputs["attempt"], second.outputs["degraded"]) == (2, False)
    third = answer(layer, ledger, bad)
    assert third.decision == "fallback" and third.outputs["degraded"]
    assert third.fallback is not None and third.fallback.kind == "answer.degraded"
    assert "http" not in (third.outputs["fallback_answer"] or "x")
    assert third.outputs["sources"] == [] and third.outputs["attempt"] == 3
    fourth = answer(layer, ledger, f"见[气功源流]({KB}/qg-001)")
    assert fourth.decision == "fallback" and fourth.outputs["sources"] == []


def test_attempts_are_per_question_member_and_session(layer: ConstraintLayer) -> None:
    """Another question, the same question asked in other spellings (traditional, case), and
    another session are counted apart or together as they should be."""
    ledger, bad = searched(), f"[x]({KB}/qg-404)"
    answer(layer, ledger, bad, question="氣功的源流是什麼")  # traditional: the same question
    again = answer(layer, ledger, bad, question="气功的源流是什么")
    other = answer(layer, ledger, bad, question="八段锦怎么练")
    elsewhere = answer(layer, searched("t"), bad, session="t")
    assert [again.outputs["attempt"], other.outputs["attempt"]] == [2, 1]
    assert elsewhere.outputs["attempt"] == 1


def test_an_approved_answer_on_its_last_attempt_is_not_degraded(layer: ConstraintLayer) -> None:
    """Degrading is for failures: a good third attempt is approved with its sources."""
    ledger = searched()
    for _ in range(2):
        answer(layer, ledger, f"[x]({KB}/qg-404)")
    third = answer(layer, ledger, f"见[气功源流]({KB}/qg-001)")
    assert third.decision == "approved" and third.outputs["sources"]


# --- English, and bad input -------------------------------------------------------------------


def test_english_answers_are_worded_in_english(policies: PolicySet) -> None:
    """The same checks, worded from the English catalog."""
    layer = ConstraintLayer(policies, MemoryCouncil(), language="en")
    result = answer(layer, searched(), "![x](https://evil.example.com/x.png)", question="Qigong?")
    assert "never returned by a tool" in result.reason


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"member": "lingzhi", "answer": ""}, "answer: a non-empty text is required"),
        ({"answer": "x"}, "member: a non-empty text is required"),
        ({"member": "lingzhi", "answer": "x", "intent": "list"}, "valid values: general, catalog"),
        ({"member": "lingzhi", "answer": "x", "attempt": "2"}, "attempt: must be an integer"),
    ],
)
def test_bad_answers_are_refused_naming_the_field(given: dict[str, Any], message: str) -> None:
    """An answer input that cannot be verified names the field and what is valid."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ANSWER.assertion(given)


def test_content_checks_still_run_on_the_answer(layer: ConstraintLayer) -> None:
    """Medical advice inside an answer is rejected like in any assertion."""
    result = answer(layer, searched(), "失眠吃什么药：安眠药每晚两片")
    assert result.decision == "rejected" and "boundary.medical" in result.failed_codes


def _dump(result: VerificationResult) -> str:
    return json.dumps(result.outputs, ensure_ascii=False)


def test_outputs_are_json(layer: ConstraintLayer, tmp_path: Path) -> None:
    """The outputs are plain JSON (they go to the log and to replay's output line)."""
    assert json.loads(_dump(answer(layer, searched(), f"[x]({KB}/qg-001)")))["gate"] == "open"


# --- length ------------------------------------------------------------------------------

LENGTHS = [
    # (characters, kind, rejected by pre.content?) — an answer may be twice a statement's length
    (5000, "answer", False),
    (5000, "fact", True),
    (7900, "answer", False),
    (8100, "answer", True),  # past [limits] max_text_chars too
]


@pytest.mark.parametrize(("size", "kind", "rejected"), LENGTHS)
def test_answers_may_be_longer_than_statements(
    layer: ConstraintLayer, size: int, kind: str, rejected: bool
) -> None:
    """A whole answer with its citations gets 8,000 characters, a statement 4,000."""
    line = f"[{FOUND[0].title}]({FOUND[0].url}) 记载了气功的源流。\n"
    text = (line * (size // len(line) + 1))[:size]
    if kind == "answer":
        result = answer(layer, searched(), text)
    else:
        result = layer.verify(Assertion(member="lingzhi", type="fact", content=text), searched())
    content = next((c for c in result.checks if c.code in ("pre.content", "pre.size")), None)
    failed = any(c.code in ("pre.content", "pre.size") and not c.passed for c in result.checks)
    assert failed is rejected, content.reason if content else result.reason


# --- one finding per unknown URL ----------------------------------------------------------

ONCE = [
    # (answer, question) — an unknown link, image, bare URL; zh and en
    (f"见[气功大全]({KB}/qg-999)", "气功的源流是什么"),
    ("![diagram](https://evil.example.com/x.png)", "What does qigong look like?"),
    (f"See https://evil.example.com/page and [气功源流]({KB}/qg-001).", "Where is it from?"),
]


@pytest.mark.parametrize(("text", "question"), ONCE)
def test_an_unknown_url_in_an_answer_is_one_finding(
    layer: ConstraintLayer, text: str, question: str
) -> None:
    """An answer's unknown URL fails answer.urls_returned alone (evidence.urls_recorded does
    not run on answers), so it is one gap, one code; the decision is still a rejection."""
    result = answer(layer, searched(), text, question=question)
    failed = [c.code for c in result.checks if not c.passed]
    assert result.decision == "rejected" and failed == ["answer.urls_returned"]
    assert "evidence.urls_recorded" not in {c.code for c in result.checks}
    assert [g["code"] for g in result.outputs["gaps"]] == ["answer.urls_returned"]


def test_an_unknown_url_in_a_statement_is_still_evidence_urls_recorded(
    layer: ConstraintLayer,
) -> None:
    """The other side: a fact (not an answer) citing a URL no tool returned keeps its code."""
    content = f"气功的源流见 {KB}/qg-999"
    result = layer.verify(Assertion(member="lingzhi", type="fact", content=content), searched())
    assert "evidence.urls_recorded" in result.failed_codes


# --- answer.urls_returned may be replaced, never dropped ----------------------------------

OWN_URLS = '[[checks]]\ncheck = "{check}"\nstage = "fact_verification"\ntypes = [{types}]\n'
DISABLES = [
    # (lingzhi.toml's disable, its own entry appended, the key of the load error or None)
    ('"answer.urls_returned"', "", "disable[0]"),
    ('"answer.urls_returned"', OWN_URLS.format(check="answer.urls_returned", types='"fact"'), "disable[0]"),
    ('"answer.urls_returned"', OWN_URLS.format(check="evidence.id_patterns", types='"answer"'), "disable[0]"),
    ('"answer.urls_returned"', OWN_URLS.format(check="answer.urls_returned", types='"answer"'), None),
    ('"answer.urls_returned"', OWN_URLS.format(check="evidence.urls_recorded", types='"answer", "fact"'), None),
    ('"evidence.urls_recorded"', "", None),  # statements only: answers keep answer.urls_returned
]  # fmt: skip
UNKNOWN_URLS = [  # (answer, question): each cites a URL no tool returned, zh and en
    (f"见[气功大全]({KB}/qg-999)", "气功的源流是什么"),
    ("See https://evil.example.com/page for the history.", "Where is qigong from?"),
]


def _lingzhi_with(tmp_path: Path, disable: str, own: str) -> Path:
    """The shipped policies, 灵知 disabling one more shared check and adding ``own``."""
    import shutil

    from tests.conftest import SHIPPED_POLICIES

    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    zhi = folder / "lingzhi.toml"
    text = zhi.read_text(encoding="utf-8").replace('disable = ["', f'disable = [{disable}, "', 1)
    zhi.write_text(text + "\n" + own, encoding="utf-8")
    return folder


@pytest.mark.parametrize(("disable", "own", "key"), DISABLES)
def test_a_member_cannot_leave_its_answers_without_a_url_check(
    tmp_path: Path, disable: str, own: str, key: str | None
) -> None:
    """Disabling answer.urls_returned is a load error on the member's ``disable`` unless the
    member's own entry (answer.urls_returned or evidence.urls_recorded) runs on answers; where
    the folder loads, an answer citing a URL no tool returned is still rejected (zh and en)
    and one citing a returned URL still passes that check."""
    from lingyi.policy import load_policies
    from lingyi.policy._load import policy_errors

    folder = _lingzhi_with(tmp_path, disable, own)
    errors = [(Path(e.path).name, e.key, e.message) for e in policy_errors(folder)]
    if key is not None:
        assert [e[:2] for e in errors] == [("lingzhi.toml", key)]
        assert "may be replaced, not dropped" in errors[0][2]
        return
    assert errors == []
    layer = ConstraintLayer(load_policies(folder), MemoryCouncil(), language="zh")
    for text, question in UNKNOWN_URLS:
        assert answer(layer, searched(), text, question=question).decision == "rejected"
    known = answer(layer, searched(), f"见[气功源流]({KB}/qg-001)。", attempt=1)
    url_checks = [
        c for c in known.checks if c.code in ("answer.urls_returned", "evidence.urls_recorded")
    ]
    assert url_checks and all(c.passed for c in url_checks)
