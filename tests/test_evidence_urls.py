"""URLs in free text must be among those that tools returned in this session.

Membership compares normal forms: the case of scheme and host, a www., a default port, a
trailing slash and a fragment do not make another URL; another path, another host, the
recorded host used as a subdomain, a look-alike domain or letters of another script do.
Extraction runs on canonical text, so upper-case schemes, full-width letters and HTML
entities are found, and full-width punctuation still ends a URL.
"""

from __future__ import annotations

import pytest

from lingyi.policy import PolicySet
from tests._evidence_world import check, verify, world_layer, world_ledger

URLS = [
    # (content, member, session, passes)
    ("庖丁解牛条目：https://kb.example.net/zz/paoding", "lingzhi", "w1", True),
    ("庖丁解牛条目：HTTPS://KB.EXAMPLE.NET/zz/paoding/", "lingzhi", "w1", True),
    ("Qiwulun guide: HTTPS://www.kb.example.net/zz/qiwulun#butterfly", "lingzhi", "w1", True),
    ("Qiwulun guide: https://kb.example.net:443/zz/qiwulun", "lingzhi", "w1", True),
    ("v2.3 审计：https://ci.example.net/audit/v2.3，三个低危。", "lingflow", "w1", True),
    ("分组满意度（https://data.example.net/an/77）：B 4.6，A 4.1", "lingresearch", "w1", True),
    (
        "Diamond Sutra entry: ｈｔｔｐｓ://ｋｂ.ｅｘａｍｐｌｅ.ｎｅｔ/ｆｏ/ｄｉａｍｏｎｄ",
        "lingzhi",
        "w1",
        True,
    ),
    ("Diamond Sutra entry: https&#58;//kb.example.net/fo/diamond", "lingzhi", "w1", True),
    ("Diamond Sutra entry: https://kb.exam\u200bple.net/fo/diamond", "lingzhi", "w1", True),
    ("LingFlow said the notes are at https://ci.example.net/notes/v2.3", "lingyi", "w1", True),
    ("As LingFlow posted, notes: https://ci.example.net/notes/v2.3", "lingyi", "w1", True),
    # not returned
    ("Audit notes: https://ci.example.net/notes/v2.3", "lingflow", "w1", False),  # posted only
    ("Qiwulun guide: http://kb.example.net/zz/qiwulun", "lingzhi", "w1", False),  # http ≠ https
    ("庖丁解牛条目：https://kb.example.net/zz/paoding-full", "lingzhi", "w1", False),
    ("Qiwulun guide: https://kb.example.net/zz/Qiwulun", "lingzhi", "w1", False),  # path case
    ("Qiwulun guide: https://kb.example.org/zz/qiwulun", "lingzhi", "w1", False),
    ("Qiwulun guide: https://kb.example.net.mirror.io/zz/qiwulun", "lingzhi", "w1", False),
    ("Qiwulun guide: https://kb-example.net/zz/qiwulun", "lingzhi", "w1", False),
    ("Diamond Sutra entry: https://kb.ex\u0430mple.net/fo/diamond", "lingzhi", "w1", False),
    ("Diamond Sutra entry: https://kb.example.net/fo/&#100;iamond-notes", "lingzhi", "w1", False),
    (
        "Diamond Sutra entry: ｈｔｔｐｓ://ｋｂ.ｅｘａｍｐｌｅ.ｎｅｔ/ｆｏ/ｌｏｔｕｓ",
        "lingzhi",
        "w1",
        False,
    ),
    ("庖丁解牛条目：https://kb.example.net/zz/paoding", "lingzhi", "w2", False),
    ("LingFlow said the notes are at https://ci.example.net/notes/v2.4", "lingyi", "w1", False),
]


@pytest.mark.parametrize(("content", "member", "session", "passes"), URLS)
def test_urls_must_have_been_returned_in_this_session(
    policies: PolicySet, content: str, member: str, session: str, passes: bool
) -> None:
    """A URL counts as returned in any equal form; a different resource does not."""
    result = verify(world_layer(policies), world_ledger(), content, member=member, session=session)
    assert check(result, "evidence.urls_recorded").passed is passes, result.reason


def test_a_look_alike_url_is_named_as_such(policies: PolicySet) -> None:
    """A URL spelled with another script's letters is refused even when it folds to a
    returned one, and the reason says why."""
    content = "Diamond Sutra entry: https://kb.ex\u0430mple.net/fo/diamond"
    url = check(verify(world_layer(policies), world_ledger(), content), "evidence.urls_recorded")
    assert not url.passed and url.detail["look_alike"] and "look-alike" in url.reason
