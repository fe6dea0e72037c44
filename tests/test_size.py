"""What the checks read is bounded: one request cannot cost the guard seconds of analysis.

A content or text argument longer than ``[limits] max_text_chars`` is rejected by the
mandatory ``pre.size`` (naming the field and its length) and the checks read only its first
``max_text_chars`` characters; the log keeps the original (cut by its own size limit).
"""

from __future__ import annotations

import pytest

from lingyi.checks._registry import Services
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer, bound_texts
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicySet

LIMIT = 500

CASES = [
    # (fields, expected failing field or None)
    ({"member": "lingyi", "type": "fact", "content": "气功" * 400}, "content (800)"),
    ({"member": "lingyi", "type": "fact", "content": "LingFlow said it shipped. " * 40}, "content (1040)"),
    ({"member": "lingzhi", "type": "action", "content": "search", "tool_call": {"name": "search_knowledge", "arguments": {"query": "x" * 600}}}, "tool_call.arguments.query (600)"),
    ({"member": "lingflow", "type": "action", "content": "commit", "tool_call": {"name": "git_commit", "arguments": {"repo_path": "r", "message": "ok", "paths": ["a", "b" * 900]}}}, "tool_call.arguments.paths[1] (900)"),
    ({"member": "lingyi", "type": "fact", "content": "气功" * 250}, None),  # exactly the limit
    ({"member": "lingyi", "type": "communication", "content": "Meeting at 9 tomorrow."}, None),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "field"), CASES)
def test_texts_over_the_limit_are_rejected_by_pre_size(
    policies: PolicySet, fields: dict[str, object], field: str | None
) -> None:
    """Longer than the limit: rejected, naming the field and its length; not longer: no pre.size."""
    layer = ConstraintLayer(
        policies, MemoryCouncil(), services=Services(max_text_chars=LIMIT), language="en"
    )
    result = layer.verify(Assertion.model_validate(fields), Ledger())
    size = [c for c in result.checks if c.code == "pre.size"]
    if field is None:
        assert not size
        return
    assert result.decision == "rejected" and size and field in size[0].reason


def test_the_checks_read_a_cut_copy_and_the_original_is_untouched() -> None:
    """The copy the checks read is cut; the assertion itself (what the log keeps) is not."""
    original = Assertion(
        member="lingyi",
        type="fact",
        content="a" * 30,
        tool_call={"name": "t", "arguments": {"q": ["b" * 30]}},
    )
    cut, long = bound_texts(original, 10)
    assert (
        cut.content == "a" * 10 and cut.tool_call and cut.tool_call.arguments == {"q": ["b" * 10]}
    )
    assert original.content == "a" * 30 and long == [
        "content (30)",
        "tool_call.arguments.q[0] (30)",
    ]
