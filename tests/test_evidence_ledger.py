"""The evidence ledger: indexed by id, URL, member, tool and term, each lookup per session.

Ids are compared in one form (canonical, case-folded, a UUID trace id as its 32 hex digits,
a short commit SHA as the commit it abbreviates); URLs by their normal form; the evidence of
a member's work is that of one session; related evidence is found through bounded posting
lists, so that a lookup does not grow with the session.
"""

from __future__ import annotations

import pytest

from lingyi.ledger import POSTINGS, Ledger, evidence_key
from lingyi.models import Evidence

TRACE = "c0ffee1234567890abcdef0123456789"
UUID = "7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"
SHA = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"


@pytest.fixture
def ledger() -> Ledger:
    led = Ledger()
    led.record("w1", "lingflow", "query_traces", {"service": "search-api"}, [Evidence(id=TRACE)])
    led.record("w1", "lingflow", "query_traces", {"service": "billing"}, [Evidence(id=UUID)])
    led.record("w1", "lingflow", "git_commit", {"message": "docs"}, [Evidence(id=SHA)])
    led.record(
        "w1",
        "lingzhi",
        "search_knowledge",
        {"query": "庄子"},
        [Evidence(id="kb:zz-101", title="庖丁解牛", url="https://kb.example.net/zz/Paoding/")],
    )
    return led


KEYS = [
    # (written, same key as) — one id, however it is written
    ("C0FFEE1234567890ABCDEF0123456789", TRACE),
    ("7A1E2B3C-4D5E-4F60-8A9B-0C1D2E3F4A5B", "7a1e2b3c4d5e4f608a9b0c1d2e3f4a5b"),
    ("7a1e2b3c4d5e4f608a9b0c1d2e3f4a5b", UUID),
    ("KB:ZZ-101", "kb:zz-101"),
    ("ｋｂ：ｚｚ－１０１", "kb:zz-101"),  # full width
    ("kb:zz\u200b-101", "kb:zz-101"),  # a zero-width space inside
]


@pytest.mark.parametrize(("written", "same"), KEYS)
def test_an_id_has_one_key_however_it_is_written(written: str, same: str) -> None:
    """Case, width, invisible characters and the UUID dashes do not make another id."""
    assert evidence_key(written) == evidence_key(same)


LOOKUPS = [
    # (session, id as cited, found)
    ("w1", TRACE.upper(), True),
    ("w1", "7a1e2b3c4d5e4f608a9b0c1d2e3f4a5b", True),  # compact form of a recorded UUID
    ("w1", "9e8d7c6", True),  # a short SHA of the recorded commit
    ("w1", "9e8d7c6b5a4f", True),
    ("w1", "9e8d7c7", False),  # one digit off
    ("w1", "c0ffee1", False),  # a trace id is not a commit to abbreviate: no such commit
    ("w1", "kb:zz-102", False),
    ("w2", TRACE, False),  # recorded in another session
    ("w2", "kb:zz-101", False),
]


@pytest.mark.parametrize(("session", "cited", "found"), LOOKUPS)
def test_evidence_is_found_by_id_in_its_session_only(
    ledger: Ledger, session: str, cited: str, found: bool
) -> None:
    """has() answers for one session; a short SHA finds the commit it starts."""
    assert ledger.session(session).has(cited) is found


URLS = [
    ("https://kb.example.net/zz/Paoding", True),  # trailing slash dropped
    ("HTTPS://WWW.KB.EXAMPLE.NET/zz/Paoding#top", True),
    ("https://kb.example.net:443/zz/Paoding/", True),
    ("https://kb.example.net/zz/paoding", False),  # the path keeps its case
    ("https://kb.example.net/zz/Paoding/more", False),
    ("http://kb.example.net.evil.io/zz/Paoding", False),
]


@pytest.mark.parametrize(("url", "found"), URLS)
def test_urls_are_members_in_normal_form(ledger: Ledger, url: str, found: bool) -> None:
    """Scheme and host case, www., default port, slash and fragment do not matter; path does."""
    session = ledger.session("w1")
    assert session.has_url(url) is found
    assert bool(session.by_url(url)) is found


TEXT_URLS = [
    # (title, snippet, URL asked for, found) — URLs written in the text count as returned
    (
        "庖丁解牛",
        "见 https://kb.example.net/zz/Yangsheng。",
        "https://kb.example.net/zz/yangsheng",
        False,
    ),
    (
        "庖丁解牛",
        "见 https://kb.example.net/zz/Yangsheng。",
        "https://kb.example.net/zz/Yangsheng/",
        True,
    ),
    (
        "庖丁解牛",
        "见ｈｔｔｐｓ：／／kb.example.net/zz/Yangsheng，",
        "https://kb.example.net/zz/Yangsheng",
        True,
    ),
    ("Cook Ding", "see (https://kb.example.net/en/Ding).", "https://kb.example.net/en/Ding", True),
    ("Cook Ding", "no link here", "https://kb.example.net/en/Ding", False),
]


@pytest.mark.parametrize(("title", "snippet", "url", "found"), TEXT_URLS)
def test_urls_in_the_text_are_found_every_time_they_are_recorded(
    title: str, snippet: str, url: str, found: bool
) -> None:
    """A URL in a title or snippet (full-width punctuation too) is found in normal form; the
    same hit recorded again (its URLs now cached) is indexed again, in every session."""
    led, hit = Ledger(), Evidence(id="kb:zz-1", title=title, snippet=snippet)
    for session, times in (("w1", 1), ("w1", 2), ("w2", 1)):
        led.record(session, "lingzhi", "search_knowledge", {}, [hit])
        assert led.session(session).has_url(url) is found
        assert len(led.session(session).by_url(url)) == (times if found else 0)


def test_work_evidence_is_per_session(ledger: Ledger) -> None:
    """A member's work backs claims only in the session that recorded it."""
    ledger.record("w2", "lingflow", "generate_audit_report", {"version": "v2.4"}, [])
    assert [e.tool for e in ledger.work_evidence("w1", "lingflow")] == [
        "query_traces",
        "query_traces",
        "git_commit",
    ]
    assert [e.tool for e in ledger.work_evidence("w2", "lingflow")] == ["generate_audit_report"]
    assert ledger.work_evidence("w3", "lingflow") == []
    assert len(list(ledger.entries_by("lingflow"))) == 4  # every session, as before
    assert len(list(ledger.entries_by("lingflow", "w2"))) == 1


def test_related_evidence_comes_from_the_index_newest_first() -> None:
    """Terms and numbers find evidence; a tool filter applies; postings are bounded."""
    led = Ledger()
    for i in range(POSTINGS + 50):
        led.record("s", "lingzhi", "search_knowledge", {}, [Evidence(id=f"kb:q-{i}", title="气功")])
    led.record("s", "lingresearch", "analyze_data", {}, [Evidence(id="an-1", snippet="n=640")])
    session = led.session("s")
    found = session.related({"气功"}, ["search_knowledge"], limit=3)
    assert [i.evidence.id for i in found] == [f"kb:q-{POSTINGS + 49 - k}" for k in range(3)]
    assert session.related({"气功"}, ["analyze_data"]) == []
    assert [i.evidence.id for i in session.related({"#640"}, ["analyze_data"])] == ["an-1"]
    assert session.count_from(["search_knowledge"]) == POSTINGS + 50
    assert len(session.related({"气功"}, ["search_knowledge"], limit=64)) == 64
