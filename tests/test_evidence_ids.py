"""Ids in free text and cited ids: recorded in this session, however they are written.

An id that matches a configured pattern (evidence ids kb:…, analysis, data-set and audit
ids, trace ids of 24–32 hex in any case or in UUID form, commit SHAs) is checked like a
cited id. A model that wants an approval spells a fabricated id in upper case, full width,
with look-alike letters, HTML entities or invisible characters: each is still caught, and the
same spellings of a recorded id still pass.
"""

from __future__ import annotations

import pytest

from lingyi.policy import PolicySet
from tests._evidence_world import (
    ON_RECORD_TRACE,
    SHORT_TRACE,
    TRACE,
    check,
    verify,
    world_layer,
    world_ledger,
)

FAKE = "1234567890abcdef1234567890abcdef"


def _wide(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _cyrillic(text: str) -> str:
    return text.replace("e", "\u0435").replace("c", "\u0441").replace("a", "\u0430")


IN_TEXT = [
    # (content, member, session, passes) — recorded ids, however spelled
    (f"search-api 的 p95 见 trace {TRACE}", "lingflow", "w1", True),
    (f"search-api p95 spike: trace {TRACE.upper()}", "lingflow", "w1", True),
    ("billing 重试风暴：7a1e2b3c4d5e4f608a9b0c1d2e3f4a5b", "lingflow", "w1", True),
    ("search-api trace c0ffee12-3456-7890-abcd-ef0123456789", "lingflow", "w1", True),
    (f"trace {TRACE[:9]}\u200b{TRACE[9:]} explains the p95", "lingflow", "w1", True),
    (f"trace {_wide(TRACE)} explains the p95", "lingflow", "w1", True),
    (f"trace {_cyrillic(TRACE)} explains the p95", "lingflow", "w1", True),
    (f"trace &#99;{TRACE[1:]} explains the p95", "lingflow", "w1", True),
    (f"auth 429 突增见 {SHORT_TRACE}", "lingflow", "w1", True),
    ("齐物论的导读见 kb:zz-101", "lingzhi", "w1", True),
    ("The Paoding entry is KB:ZZ-102.", "lingzhi", "w1", True),
    ("满意度分组结果见 an-77，数据表概况见 ds-loans", "lingresearch", "w1", True),
    ("v2.3 的审计结论见 audit-v2.3。", "lingflow", "w1", True),
    ("提交 9e8d7c6 更新了 changelog", "lingflow", "w1", True),
    ("changelog landed in commit 9E8D7C6B5A", "lingflow", "w1", True),
    (f"LingFlow said the checkout spike is trace {ON_RECORD_TRACE}.", "lingyi", "w1", True),
    ("借阅账号 123456789012345678901234 已停用", "lingyi", "w1", True),  # digits only: no id
    ("the cafe had a decade of faded facades", "lingyi", "w1", True),  # hex letters, no id
    # fabricated ids, however spelled
    (f"search-api 的 p95 见 trace {FAKE}", "lingflow", "w1", False),
    (f"search-api p95 spike: trace {FAKE.upper()}", "lingflow", "w1", False),
    ("billing trace 0f1e2d3c-4b5a-4968-8776-655443322110", "lingflow", "w1", False),
    (f"trace {FAKE[:9]}\u200b{FAKE[9:]} explains the p95", "lingflow", "w1", False),
    (f"trace {_wide(FAKE)} explains the p95", "lingflow", "w1", False),
    (f"trace {_cyrillic(FAKE)} explains the p95", "lingflow", "w1", False),
    (f"trace &#49;{FAKE[1:]} explains the p95", "lingflow", "w1", False),
    (f"auth 429 突增见 {SHORT_TRACE[:-1]}d", "lingflow", "w1", False),  # one digit off
    ("齐物论的导读见 kb:zz-109", "lingzhi", "w1", False),
    ("满意度分组结果见 an-79", "lingresearch", "w1", False),
    ("Per ds-fines the table has 5 columns.", "lingresearch", "w1", False),
    ("v2.4 的审计结论见 audit-v2.4。", "lingflow", "w1", False),
    ("提交 1a2b3c4 更新了 changelog", "lingflow", "w1", False),
    (f"search-api 的 p95 见 trace {TRACE}", "lingflow", "w2", False),  # another session
    (f"LingFlow said the outage is trace {'f' * 8 + '1' * 24}.", "lingyi", "w1", False),
]


@pytest.mark.parametrize(("content", "member", "session", "passes"), IN_TEXT)
def test_ids_in_the_text_must_be_recorded(
    policies: PolicySet, content: str, member: str, session: str, passes: bool
) -> None:
    """Ids written in the content are checked like cited ids, in canonical form."""
    result = verify(world_layer(policies), world_ledger(), content, member=member, session=session)
    assert check(result, "evidence.id_patterns").passed is passes, result.reason
    if not passes:
        assert result.decision == "rejected"


CITED = [
    ([TRACE.upper()], "w1", True),
    (["7a1e2b3c4d5e4f608a9b0c1d2e3f4a5b"], "w1", True),  # the UUID, compact
    (["KB:ZZ-101", "kb:zz-101"], "w1", True),
    (["9e8d7c6"], "w1", True),  # a short SHA of the recorded commit
    (["kb:zz-404"], "w1", False),
    ([TRACE], "w2", False),
]


@pytest.mark.parametrize(("cited", "session", "passes"), CITED)
def test_cited_ids_are_compared_in_one_form(
    policies: PolicySet, cited: list[str], session: str, passes: bool
) -> None:
    """evidence_ids are looked up by evidence_key: case and UUID dashes do not matter."""
    result = verify(
        world_layer(policies), world_ledger(), "see the evidence", session=session, cited=cited
    )
    assert check(result, "evidence.cited_ids_exist").passed is passes


LOOKED_UP = [
    (f"502 on checkout: trace {FAKE}", True),  # the trace backend knows it
    ("502 on checkout: trace 0000000000000000000000000000000f", False),  # it does not
    ("the checkout entry is kb:co-001", False),  # a KB id is not the trace backend's
]


@pytest.mark.parametrize(("content", "passes"), LOOKED_UP)
def test_unrecorded_trace_ids_may_be_confirmed_by_the_backend(
    policies: PolicySet, content: str, passes: bool
) -> None:
    """The trace lookup confirms hex ids only; what it confirms passes, and says so."""
    layer = world_layer(policies, trace_lookup=lambda key: key == FAKE)
    result = check(verify(layer, world_ledger(), content), "evidence.id_patterns")
    assert result.passed is passes
    if passes:
        assert result.detail["confirmed_by_lookup"] == [FAKE]
