"""The council record and the session's work, indexed by member and by term.

A relay is compared with the few messages of its member that share most of its terms, never
with the whole record. These tests pin what the index finds (the message a relay is about,
among thousands of others of the same member on the same topic), what it keeps apart (other
members, other sessions), and that it sees messages other processes appended to the file.
Timings are measured in benchmarks/bench_relays.py, not asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lingyi.checks.communication import work_index
from lingyi.council import CouncilMessage, FileCouncil, MemoryCouncil, RecordIndex, index_terms
from lingyi.ledger import Ledger
from lingyi.models import Evidence
from lingyi.policy import PolicySet


def test_index_terms_are_stems_numbers_and_bigrams() -> None:
    """Latin words by their first letters, numbers without separators, Chinese bigrams."""
    terms = index_terms("Audited 12,400 rows；迁移脚本")
    assert {"audite", "12400", "rows", "迁移", "移脚", "脚本"} <= terms


def crowded() -> MemoryCouncil:
    """Six thousand messages of one member about the same kind of work, and a few others."""
    council = MemoryCouncil()
    for i in range(6000):
        text = f"v1.{i % 40}.{i % 7} 迁移脚本已合入，构建 build-{i}"
        council.append(CouncilMessage(id=f"m-{i}", sender="lingflow", content=text))
    council.append(CouncilMessage(id="x-1", sender="lingflow", content="v2.9 迁移脚本暂缓"))
    council.append(CouncilMessage(id="x-2", sender="lingzhi", content="v2.9 迁移脚本已合入"))
    return council


@pytest.mark.parametrize(
    ("senders", "terms", "first"),
    [
        (["lingflow", "灵通"], [{"2.9"}, {"迁移"}, {"脚本"}], "x-1"),  # the rare version decides
        (["lingzhi"], [{"2.9"}, {"迁移"}], "x-2"),  # another member's message is its own
        (["lingflow"], [{"build"}, {"5999"}], "m-5999"),  # an id among six thousand builds
    ],
)
def test_the_index_finds_the_message_a_relay_is_about(
    senders: list[str], terms: list[set[str]], first: str
) -> None:
    """Among thousands of messages on the same topic, the one sharing the rare terms ranks first."""
    found = crowded().search(senders, terms, 4)
    assert found and found[0].id == first


def test_common_terms_rank_the_candidates_rare_ones_found() -> None:
    """A term in most messages does not flood the candidates: the budget stays small."""
    index = RecordIndex(budget=64)
    for i in range(5000):
        index.add("lingflow", f"release notes draft {i}", f"n-{i}")
    index.add("lingflow", "release notes final 7731", "final")
    assert index.search(["lingflow"], [{"releas"}, {"notes"}, {"7731"}], 3)[0] == "final"


def test_a_query_of_nothing_gets_the_newest_messages() -> None:
    """A claim with nothing to look up ("he said it is on hold") is read against recent messages."""
    index = RecordIndex()
    for i in range(40):
        index.add("lingzhi", f"note {i}", i)
    assert index.search(["lingzhi"], [], 3) == [39, 38, 37]


def test_the_file_record_sees_what_other_processes_appended(tmp_path: Path) -> None:
    """Lines written to the council file by another process are found by the next search."""
    path = tmp_path / "council.jsonl"
    council = FileCouncil(path)
    council.append(CouncilMessage(id="a-1", sender="lingflow", content="v3.0 冻结开始"))
    line = {"id": "a-2", "from": "lingflow", "content": "v3.1 冻结已解除"}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    assert [m.id for m in council.search(["lingflow"], [{"3.1"}], 2)] == ["a-2"]
    assert council.count_from(["lingflow"]) == 2


def test_work_is_indexed_per_session_and_read_once(policies: PolicySet) -> None:
    """Work recorded later is found on the next call; another session's work never is."""
    ledger = Ledger()
    audit = [Evidence(id="audit-v4.2", title="audit report v4.2", snippet="3 findings")]
    ledger.record("s1", "lingflow", "generate_audit_report", {"version": "v4.2"}, audit)
    first = work_index(ledger, "s1", policies)
    assert first.search(["lingflow"], [{"4.2"}], 2) == [
        ("audit-v4.2", "generate_audit_report version v4.2 audit report v4.2 3 findings")
    ]
    late = [Evidence(id="an-5", title="rows by member", snippet="lingflow wrote 88 rows")]
    ledger.record("s1", "lingresearch", "analyze_data", {}, late)
    ledger.record("s2", "lingflow", "generate_audit_report", {"version": "v4.3"}, audit)
    again = work_index(ledger, "s1", policies)
    assert again is first and len(again) == 3  # two owners for the analysis: its author, lingflow
    assert [i for i, _ in again.search(["@lingflow"], [{"88"}], 2)] == ["an-5"]  # type: ignore[misc]
    assert again.search(["lingflow"], [{"4.3"}], 2) == []
