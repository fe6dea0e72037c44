"""Active verification: where the guard can look a subject up itself (the KB), it does.

Uses the real knowledge base shipped with lingyi (SQLite FTS5), not a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lingyi.backends.kb import KnowledgeBase
from lingyi.checks._registry import Services
from lingyi.config import defaults_dir, load_config
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard, kb_lookup
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import PolicySet, load_policies


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase(defaults_dir() / "kb")


def layer_with(policies: PolicySet, lookup: Callable[[str], list[Evidence]]) -> ConstraintLayer:
    services = Services(lookups={"knowledge_base": lookup})
    return ConstraintLayer(policies, MemoryCouncil(), services=services, language="en")


CLAIMS = [
    ("知识库中有关于气功与呼吸的文章", "approved", "kb:qg-007"),
    ("知识库里有讲四圣谛的文章", "approved", "kb:shi-001"),
    ("知识库中有关于气功的文章", "approved", None),
    ("The knowledge base has an article on root cause analysis", "approved", None),
    ("知识库中有关于量子计算机的文章", "rejected", None),
    ("The knowledge base has an article on quantum computing", "rejected", None),
]


@pytest.mark.parametrize(("content", "decision", "doc"), CLAIMS)
def test_kb_facts_are_verified_by_searching(
    policies: PolicySet, kb: KnowledgeBase, content: str, decision: str, doc: str | None
) -> None:
    """With no search in the session, the guard searches the KB: found passes, absent rejects."""
    layer = layer_with(policies, kb_lookup(lambda: kb))
    result = layer.verify(Assertion(member="lingzhi", type="fact", content=content), Ledger())
    assert result.decision == decision, result.reason
    check = next(c for c in result.checks if c.code == "evidence.subject_supported")
    if doc:
        assert doc in [e.id for e in check.found]


def test_what_was_found_becomes_citable_evidence(tmp_path: Path, kb: KnowledgeBase) -> None:
    """Guard.check records the looked-up documents, so citing them next is not fabrication."""
    config = load_config(defaults_dir() / "lingyi.toml", log=tmp_path / "log.jsonl")
    guard = Guard.from_config(
        config,
        source="test",
        council=MemoryCouncil(),
        lookups={"knowledge_base": kb_lookup(lambda: kb)},
    )
    ledger = Ledger()

    def fact(session: str, content: str, cited: list[str]) -> str:
        assertion = Assertion(
            member="lingzhi", type="fact", session=session, content=content, evidence_ids=cited
        )
        return guard.check(assertion, ledger).decision.value

    assert fact("s", "知识库中有关于气功与呼吸的文章", []) == "approved"
    assert fact("s", "调息是气功的核心", ["kb:qg-007"]) == "approved"
    assert fact("other", "调息是气功的核心", ["kb:qg-007"]) == "rejected"  # its own session only


@pytest.mark.parametrize(("on_error", "decision"), [("fail", "rejected"), ("pass", "approved")])
def test_a_failing_lookup_follows_on_error(
    policies: PolicySet, on_error: str, decision: str, tmp_path: Path
) -> None:
    """A KB that cannot be searched is an outage: the check's on_error decides, marked degraded."""
    folder = tmp_path / "validators"
    folder.mkdir()
    (folder / "m.toml").write_text(
        'member = "m"\nname = "M"\n[[checks]]\ncheck = "evidence.subject_supported"\nstage = "fact_verification"\n'
        f'on_error = "{on_error}"\n[checks.params.subjects.kb]\nmarkers = ["知识库"]\ntools = ["search_knowledge"]\n'
        'lookup = "knowledge_base"\n',
        encoding="utf-8",
    )

    def broken(query: str) -> list[Evidence]:
        raise OSError("database is locked")

    layer = layer_with(load_policies(folder, require_shared=False), broken)
    result = layer.verify(
        Assertion(member="m", type="fact", content="知识库中有气功文章"), Ledger()
    )
    check = next(c for c in result.checks if c.code == "evidence.subject_supported")
    assert result.decision == decision and check.degraded and "database is locked" in check.reason
