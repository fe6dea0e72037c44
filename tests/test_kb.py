"""The knowledge-base backend: indexing, Chinese segmentation, search, refresh, problems."""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from lingyi.backends.kb import (
    DEFAULT_KB_DIR,
    KBDoc,
    KBHit,
    KnowledgeBase,
    index_path,
    indexer,
    open_kept,
    segment,
)
from lingyi.backends.kb.terms import index_text
from lingyi.config import defaults_dir
from lingyi.errors import BackendError
from lingyi.guard import kb_domains
from lingyi.policy import load_policies

FILLER = "这是一段用来凑足篇幅的普通文字，与检索的主题没有关系。"


def write_doc(
    folder: Path,
    name: str,
    doc_id: str,
    title: str,
    body: str,
    domain: str = "科",
    tags: str = "[测试]",
) -> Path:
    """Write one article with front matter and return its path."""
    path = folder / name
    path.write_text(
        f"---\nid: {doc_id}\ntitle: {title}\ndomain: {domain}\ntags: {tags}\n---\n{body}\n",
        encoding="utf-8",
    )
    return path


def touch_later(path: Path) -> None:
    """Move the mtime forward so a same-size edit is still seen as a change."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


# The deployment's domains: the values of 灵知's search_knowledge ``domains`` argument.
DOMAINS = tuple(kb_domains(load_policies(defaults_dir() / "validators")) or ())


@pytest.fixture(scope="module")
def shipped() -> KnowledgeBase:
    return KnowledgeBase(DEFAULT_KB_DIR, domains=DOMAINS)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    write_doc(folder, "a.md", "kb:t-001", "量子纠缠", "量子纠缠是一种关联现象。" + FILLER, "科")
    write_doc(
        folder, "b.md", "kb:t-002", "物理学史", "二十世纪物理学中量子纠缠与量子纠缠实验。", "科"
    )
    write_doc(folder, "c.md", "kb:t-003", "气功源流", "气功有悠久的历史。" + FILLER, "气")
    write_doc(folder, "d.md", "kb:t-004", "Tea Culture", "Green tea and oolong tea.", "道", "[tea]")
    return folder


# --------------------------------------------------------------------------- segmentation


@pytest.mark.parametrize(
    ("text", "for_index", "expected"),
    [
        ("气功源流", True, ["气功", "功源", "源流", "流"]),
        ("气功源流", False, ["气功", "功源", "源流"]),
        ("气", False, ["气"]),
        ("Qigong 与 Tai-Chi", False, ["qigong", "与", "tai", "chi"]),
        ("道家，儒家", False, ["道家", "儒家"]),
        ("  \t", False, []),
    ],
)
def test_segment_makes_bigrams_and_lowercase_words(
    text: str, for_index: bool, expected: list[str]
) -> None:
    """CJK runs become overlapping bigrams (a lone char stays), words are lowercased."""
    assert segment(text, for_index=for_index) == expected


@pytest.mark.parametrize(
    "text",
    [
        "气功源流",
        "气",
        "道家，儒家。气功有悠久的历史",
        "Qigong 与 Tai-Chi, QIGONG qigong",
        "ΟΔΟΣ ΑΣ'Β İstanbul café snake_case x2",  # final sigma, dotted I, underscore
        "気功・テスト 한국어 텍스트 气气气",
        "",
        "  \t\n",
        "。，！",
    ],
)
def test_index_text_is_the_index_tokens_of_segment(text: str) -> None:
    """The fast path of the index makes exactly the tokens, as many times each, that
    ``segment`` makes for the index (their order does not matter: no positions are kept),
    so queries match what they matched; the count is the document length of bm25."""
    tokens = segment(text)
    indexed, count = index_text(text)
    assert sorted(indexed.split()) == sorted(tokens) and count == len(tokens)


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    ("query", "expected_id", "expected_domain"),
    [
        ("气功", "kb:qg-", "气"),
        ("道家", "kb:dao-001", "道"),
        ("太极拳", "kb:wu-001", "武"),
        ("四圣谛", "kb:shi-001", "释"),
        ("论语", "kb:ru-001", "儒"),
        ("庄子逍遥游", "kb:dao-002", "道"),
        ("气功的修炼方法", "kb:qg-002", "气"),
        ("黄帝内经", "kb:yi-001", "医"),
        ("王阳明心学", "kb:xin-001", "心"),
        ("认识论", "kb:zhe-001", "哲"),
        ("科学方法论", "kb:ke-001", "科"),
        ("设备故障诊断", "kb:ke-002", "科"),
    ],
)
def test_chinese_queries_find_their_documents(
    shipped: KnowledgeBase, query: str, expected_id: str, expected_domain: str
) -> None:
    """Two-character and longer Chinese queries put the right article first."""
    hits = shipped.search(query)
    assert hits, query
    assert hits[0].id.startswith(expected_id)
    assert hits[0].domain == expected_domain


def test_two_char_query_finds_every_doc_containing_it(shipped: KnowledgeBase) -> None:
    """气功 (one bigram) matches all the qigong articles that contain the word."""
    ids = {hit.id for hit in shipped.search("气功", limit=10)}
    assert {"kb:qg-001", "kb:qg-002", "kb:qg-007"} <= ids


@pytest.mark.parametrize(
    ("query", "expected_id"),
    [("root cause", "kb:ke-004"), ("Wu Wei", "kb:dao-004"), ("QIGONG", "kb:qg-004")],
)
def test_english_query_finds_english_doc(
    shipped: KnowledgeBase, query: str, expected_id: str
) -> None:
    """English words are matched case-insensitively."""
    assert shipped.search(query)[0].id == expected_id


def test_single_cjk_char_is_a_prefix_query(kb_dir: Path) -> None:
    """A one-character query finds docs containing it, even as the last char of a word."""
    kb = KnowledgeBase(kb_dir)
    assert [h.id for h in kb.search("功")] == ["kb:t-003"]


def test_domain_filter_restricts_hits(shipped: KnowledgeBase) -> None:
    """With domain=..., only that domain's articles come back."""
    unfiltered = shipped.search("道家", limit=10)
    filtered = shipped.search("道家", limit=10, domain="气")
    assert {h.domain for h in unfiltered} > {"气"}
    assert filtered and all(h.domain == "气" for h in filtered)
    assert shipped.search("道家", domain="不存在") == []


def test_title_match_ranks_first(kb_dir: Path) -> None:
    """A doc with the query in its title beats one that only repeats it in the body."""
    hits = KnowledgeBase(kb_dir).search("量子纠缠")
    assert [h.id for h in hits] == ["kb:t-001", "kb:t-002"]
    assert hits[0].score > hits[1].score > 0


def test_title_matches_come_first_among_many_matches(tmp_path: Path) -> None:
    """Ranking looks at a bounded set of candidates, yet gathers title matches first: three
    titles beat 300 earlier bodies that repeat the term."""
    for i in range(300):
        write_doc(tmp_path, f"a{i:03d}.md", f"kb:body-{i}", f"文章{i}", "太极拳" * 3 + FILLER)
    for i in range(3):
        write_doc(tmp_path, f"z{i}.md", f"kb:title-{i}", "太极拳", FILLER)
    hits = KnowledgeBase(tmp_path, watch=False).search("太极拳", limit=5)
    assert [h.id for h in hits[:3]] == ["kb:title-0", "kb:title-1", "kb:title-2"]
    assert len(hits) == 5 and all(h.id.startswith("kb:body-") for h in hits[3:])


def test_documents_with_enough_terms_are_found_behind_common_ones(tmp_path: Path) -> None:
    """A hit needs a third of the query's terms; the one document that has them is found
    although 200 others share its most common term (they do not qualify)."""
    for i in range(200):
        write_doc(tmp_path, f"a{i:03d}.md", f"kb:common-{i}", f"文章{i}", "这是一次实验。")
    write_doc(tmp_path, "z.md", "kb:rare", "物理", "量子纠缠的性质。")
    hits = KnowledgeBase(tmp_path, watch=False).search("量子纠缠实验", limit=5)
    assert [h.id for h in hits] == ["kb:rare"]


def test_any_domain_name_can_filter(tmp_path: Path) -> None:
    """Domain names are the deployment's: spaces, symbols and scripts all filter exactly."""
    write_doc(tmp_path, "a.md", "kb:a", "Tea", "Green tea.", "Tea & Culture")
    write_doc(tmp_path, "b.md", "kb:b", "Tea", "Black tea.", "tea")
    kb = KnowledgeBase(tmp_path, watch=False)
    assert [h.id for h in kb.search("tea", domain="Tea & Culture")] == ["kb:a"]
    assert [h.id for h in kb.search("tea", domain="tea")] == ["kb:b"]
    assert kb.search("tea", domain="Tea") == []


def test_limit_caps_hits(shipped: KnowledgeBase) -> None:
    """limit bounds the number of hits; limit 0 returns none."""
    assert len(shipped.search("道", limit=2)) == 2
    assert shipped.search("道", limit=0) == []


def test_unrelated_query_returns_nothing(shipped: KnowledgeBase) -> None:
    """Sharing one common bigram (什么, 知道) is not enough to be a hit."""
    assert shipped.search("失眠吃什么药") == []
    assert shipped.search("我想知道") == []


@pytest.mark.parametrize(
    "query",
    ['"AND OR (', "*", "NEAR(a b)", '气功"', "a' OR 1=1 --", "^title:x", "-", "{title}: 气功"],
)
def test_fts_syntax_in_query_does_not_raise(kb_dir: Path, query: str) -> None:
    """Every token is quoted, so FTS5 operators in user text are just words."""
    hits = KnowledgeBase(kb_dir).search(query)
    assert isinstance(hits, list)


@pytest.mark.parametrize("query", ["*", '"(', "(((", ":"])
def test_pure_syntax_query_returns_nothing(kb_dir: Path, query: str) -> None:
    """A query made only of operators yields no tokens, hence no hits."""
    assert KnowledgeBase(kb_dir).search(query) == []


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "，。！"])
def test_empty_query_returns_nothing(kb_dir: Path, query: str) -> None:
    """Empty, whitespace-only and punctuation-only queries return []."""
    assert KnowledgeBase(kb_dir).search(query) == []


def test_snippet_is_a_body_window_around_the_term(tmp_path: Path) -> None:
    """The snippet is ~80 chars of the original body around the first match."""
    body = "甲" * 200 + "关键术语在这里出现。" + "乙" * 200
    write_doc(tmp_path, "s.md", "kb:s-001", "长文", body)
    snippet = KnowledgeBase(tmp_path).search("关键术语")[0].snippet
    assert "关键术语" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= 82
    assert " " not in snippet  # the original text, not the segmented tokens


def test_hit_converts_to_evidence(shipped: KnowledgeBase) -> None:
    """A hit becomes Evidence with its id, title and snippet and no URL."""
    hit = shipped.search("调息")[0]
    evidence = hit.to_evidence()
    assert isinstance(hit, KBHit)
    assert (evidence.id, evidence.title, evidence.url) == ("kb:qg-007", "气功与呼吸", None)
    assert "调息是气功的核心" in evidence.snippet


def test_get_returns_the_document(kb_dir: Path) -> None:
    """get() returns the parsed doc with its folder-relative path, or None."""
    kb = KnowledgeBase(kb_dir)
    doc = kb.get("kb:t-004")
    assert doc is not None
    assert (doc.title, doc.domain, doc.tags, doc.path) == ("Tea Culture", "道", ["tea"], "d.md")
    assert kb.get("kb:nope") is None
    assert kb.ids() == {"kb:t-001", "kb:t-002", "kb:t-003", "kb:t-004"}


# --------------------------------------------------------------------------- refresh


def test_refresh_picks_up_edit_add_and_delete(kb_dir: Path) -> None:
    """refresh() re-indexes changed, new and removed files and counts them."""
    kb = KnowledgeBase(kb_dir, watch=False, check_interval=3600)
    assert kb.refresh() == 0
    edited = write_doc(kb_dir, "c.md", "kb:t-003", "太极拳", "太极拳讲究以柔克刚。", "武")
    touch_later(edited)
    write_doc(kb_dir, "e.md", "kb:t-005", "八段锦", "八段锦是导引功法。", "气")
    (kb_dir / "d.md").unlink()
    assert kb.refresh() == 3
    assert kb.search("气功") == []
    assert [h.id for h in kb.search("太极拳")] == ["kb:t-003"]
    assert [h.id for h in kb.search("八段锦")] == ["kb:t-005"]
    assert kb.get("kb:t-004") is None and len(kb) == 4


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or the timeout passes (background work)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def found(kb: KnowledgeBase, query: str) -> list[str]:
    """The ids a search returns, in order."""
    return [h.id for h in kb.search(query)]


def test_search_picks_up_changes_without_restart(kb_dir: Path) -> None:
    """The watcher re-indexes an added, an edited and a removed file in the background."""
    kb = KnowledgeBase(kb_dir)
    write_doc(kb_dir, "new.md", "kb:t-009", "咏春拳", "咏春拳重视中线。", "武")
    assert wait_for(lambda: found(kb, "咏春拳") == ["kb:t-009"])
    write_doc(kb_dir, "new.md", "kb:t-009", "形意拳", "形意拳以五行拳为基础。", "武")
    assert wait_for(lambda: found(kb, "形意拳") == ["kb:t-009"])
    assert found(kb, "咏春拳") == []
    (kb_dir / "new.md").unlink()
    assert wait_for(lambda: kb.get("kb:t-009") is None)
    assert found(kb, "形意拳") == [] and len(kb) == 4


def test_watcher_follows_folders_moved_in_and_out(kb_dir: Path, tmp_path: Path) -> None:
    """A folder moved into the KB is indexed, one removed takes its documents with it."""
    kb = KnowledgeBase(kb_dir)
    outside = tmp_path / "incoming"
    outside.mkdir()
    write_doc(outside, "x.md", "kb:in-1", "咏春拳", "咏春拳重视中线。", "武")
    outside.rename(kb_dir / "moved")
    assert wait_for(lambda: found(kb, "咏春拳") == ["kb:in-1"])
    doc = kb.get("kb:in-1")
    assert isinstance(doc, KBDoc) and doc.path == "moved/x.md"
    (kb_dir / "moved").rename(tmp_path / "gone")
    assert wait_for(lambda: kb.get("kb:in-1") is None)
    assert kb.refresh() == 0  # the background work left nothing for a full check


def test_search_never_checks_the_folder_itself(kb_dir: Path) -> None:
    """Change detection is off the request path: with no watcher and a long interval, a new
    file waits for the next check; refresh() checks at once."""
    kb = KnowledgeBase(kb_dir, watch=False, check_interval=3600)
    write_doc(kb_dir, "new.md", "kb:t-009", "咏春拳", "咏春拳重视中线。", "武")
    assert kb.search("咏春拳") == []
    assert kb.refresh() == 1
    assert [h.id for h in kb.search("咏春拳")] == ["kb:t-009"]


def test_without_a_watcher_a_periodic_check_finds_changes(kb_dir: Path) -> None:
    """watch=False: the background check, every check_interval seconds, finds the change."""
    kb = KnowledgeBase(kb_dir, watch=False, check_interval=0.05)
    write_doc(kb_dir, "new.md", "kb:t-009", "咏春拳", "咏春拳重视中线。", "武")
    assert wait_for(lambda: found(kb, "咏春拳") == ["kb:t-009"])


def test_one_changed_file_is_the_only_one_read(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Incremental indexing: after an edit, a check reads that file alone."""
    kb = KnowledgeBase(kb_dir, watch=False, check_interval=3600)
    read: list[str] = []
    real = indexer.load_file

    def counting(root: Path, rel: str, domains: object) -> object:
        read.append(rel)
        return real(root, rel, domains)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer, "load_file", counting)
    touch_later(write_doc(kb_dir, "b.md", "kb:t-002", "物理学史", "二十世纪的物理学。", "科"))
    assert kb.refresh() == 1 and read == ["b.md"]
    assert [h.id for h in kb.search("量子纠缠")] == ["kb:t-001"]


# --------------------------------------------------------------------------- problems


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("没有前言的正文。\n", 1, "missing front matter"),
        ("---\nid: kb:x-1\ntitle: 标题\n", 1, "not closed"),
        ("---\nid: kb:x-1\nthis line is wrong\ntitle: 标题\ndomain: 科\n---\n正文\n", 3, "key"),
        ("---\nid: kb:x-1\ntitle: 标题\ndomain: 魔\n---\n正文\n", 4, "unknown domain"),
        ("---\nid: kb:x-1\ndomain: 科\n---\n正文\n", 1, "'title'"),
        ("---\ntitle: 标题\ndomain: 科\n---\n正文\n", 1, "'id'"),
        ("---\nid: x-1\ntitle: 标题\ndomain: 科\n---\n正文\n", 2, "kb:"),
        ("---\nid: kb:x-1\ntitle: 标题\ndomain: 科\ntags: a, b\n---\n正文\n", 5, "tags"),
        ("---\nid: kb:x-1\nid: kb:x-2\ntitle: 标题\ndomain: 科\n---\n正文\n", 3, "duplicate key"),
    ],
)
def test_bad_front_matter_is_skipped_and_reported(
    kb_dir: Path, text: str, line: int, fragment: str
) -> None:
    """A malformed doc is reported with file and line; the others are still indexed."""
    (kb_dir / "bad.md").write_text(text, encoding="utf-8")
    kb = KnowledgeBase(kb_dir, domains=DOMAINS)
    assert len(kb) == 4
    [problem] = kb.problems
    assert (problem.file, problem.line) == ("bad.md", line)
    assert fragment in problem.message


def test_quoted_values_and_tags_are_unquoted(tmp_path: Path) -> None:
    """Quoted scalars and list items lose their quotes; an empty tag list is allowed."""
    text = "---\nid: \"kb:q-1\"\ntitle: 'A: B'\ndomain: 哲\ntags: ['x', \"y\", ]\n---\n正文\n"
    (tmp_path / "q.md").write_text(text, encoding="utf-8")
    doc = KnowledgeBase(tmp_path).get("kb:q-1")
    assert doc is not None and (doc.title, doc.tags) == ("A: B", ["x", "y"])


def test_duplicate_ids_are_reported(kb_dir: Path) -> None:
    """The first file (by path) keeps the id; the later one is reported at its id line."""
    write_doc(kb_dir, "z.md", "kb:t-001", "另一篇", "重复的编号。")
    kb = KnowledgeBase(kb_dir)
    doc = kb.get("kb:t-001")
    assert doc is not None and doc.path == "a.md"
    [problem] = kb.problems
    assert (problem.file, problem.line) == ("z.md", 2)
    assert "duplicate id" in problem.message and "a.md" in problem.message
    (kb_dir / "a.md").unlink()
    kb.refresh()
    doc = kb.get("kb:t-001")
    assert doc is not None and doc.path == "z.md" and kb.problems == []


def test_symlink_outside_folder_is_not_indexed(tmp_path: Path, kb_dir: Path) -> None:
    """A .md symlink whose target is outside the folder is skipped and reported."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = write_doc(outside, "secret.md", "kb:secret-1", "机密", "不应被索引的内容。")
    (kb_dir / "link.md").symlink_to(secret)
    kb = KnowledgeBase(kb_dir)
    assert "kb:secret-1" not in kb.ids()
    assert kb.search("机密") == []
    assert [(p.file, p.line) for p in kb.problems] == [("link.md", 0)]
    assert "outside" in kb.problems[0].message


def test_only_visible_md_files_are_indexed(kb_dir: Path) -> None:
    """Other extensions, hidden files and hidden folders are ignored; subfolders are read."""
    write_doc(kb_dir, "note.txt", "kb:n-1", "文本", "不是 Markdown。")
    write_doc(kb_dir, ".hidden.md", "kb:n-2", "隐藏", "隐藏文件。")
    (kb_dir / ".git").mkdir()
    write_doc(kb_dir / ".git", "x.md", "kb:n-3", "仓库", "版本库内部。")
    (kb_dir / "sub").mkdir()
    write_doc(kb_dir / "sub", "deep.md", "kb:n-4", "子目录", "子目录中的文章。")
    kb = KnowledgeBase(kb_dir)
    assert kb.ids() == {"kb:t-001", "kb:t-002", "kb:t-003", "kb:t-004", "kb:n-4"}
    doc = kb.get("kb:n-4")
    assert doc is not None and doc.path == "sub/deep.md"


def test_missing_folder_raises_backend_error(tmp_path: Path) -> None:
    """A knowledge base folder that does not exist is a configuration error."""
    with pytest.raises(BackendError):
        KnowledgeBase(tmp_path / "missing")


def test_index_can_live_in_a_file(kb_dir: Path, tmp_path: Path) -> None:
    """With db_path the index is a file; opening it again reuses it rather than duplicates."""
    db = tmp_path / "index.sqlite"
    KnowledgeBase(kb_dir, db_path=db).close()
    kb = KnowledgeBase(kb_dir, db_path=db)
    assert db.exists()
    assert [h.id for h in kb.search("量子纠缠")] == ["kb:t-001", "kb:t-002"]
    assert len(kb) == 4


def test_a_kept_index_reads_only_what_changed_while_closed(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reopening a kept index reads the files changed, added or removed since, no others."""
    db = tmp_path / "index.sqlite"
    KnowledgeBase(kb_dir, db_path=db, watch=False).close()
    touch_later(write_doc(kb_dir, "a.md", "kb:t-001", "量子通信", "量子通信的历史。", "科"))
    write_doc(kb_dir, "e.md", "kb:t-005", "八段锦", "八段锦是导引功法。", "气")
    (kb_dir / "d.md").unlink()
    read: list[str] = []
    real = indexer.load_file
    monkeypatch.setattr(indexer, "load_file", lambda r, rel, d: read.append(rel) or real(r, rel, d))
    kb = KnowledgeBase(kb_dir, db_path=db, watch=False)
    assert sorted(read) == ["a.md", "e.md"]
    assert found(kb, "量子通信") == ["kb:t-001"] and found(kb, "八段锦") == ["kb:t-005"]
    assert kb.get("kb:t-004") is None and len(kb) == 4


def test_a_kept_index_built_for_other_domains_is_rebuilt(kb_dir: Path, tmp_path: Path) -> None:
    """The index remembers the domains it was built for; other domains mean a rebuild."""
    db = tmp_path / "index.sqlite"
    KnowledgeBase(kb_dir, db_path=db, watch=False).close()
    kb = KnowledgeBase(kb_dir, db_path=db, domains=("科", "道"), watch=False)
    assert len(kb) == 3 and [p.file for p in kb.problems] == ["c.md"]


def test_a_damaged_index_file_is_rebuilt(kb_dir: Path, tmp_path: Path) -> None:
    """An index file SQLite cannot read is derived data: it is replaced, not an error."""
    db = tmp_path / "index.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    kb = KnowledgeBase(kb_dir, db_path=db, watch=False)
    assert len(kb) == 4 and found(kb, "气功") == ["kb:t-003"]


def test_two_instances_can_share_one_index(kb_dir: Path, tmp_path: Path) -> None:
    """Two processes (here two instances) on one index file: both apply the same change,
    the second finds it done, and neither duplicates a document."""
    db = tmp_path / "index.sqlite"
    first = KnowledgeBase(kb_dir, db_path=db, watch=False)
    second = KnowledgeBase(kb_dir, db_path=db, watch=False)
    write_doc(kb_dir, "e.md", "kb:t-005", "八段锦", "八段锦是导引功法。", "气")
    assert first.refresh() == 1 and second.refresh() == 0
    assert found(second, "八段锦") == ["kb:t-005"] and len(second) == len(first) == 5


# A first build that dies after two of its transactions: killed, as a power cut or the OOM
# killer would, so nothing of Python's clean-up runs.
CRASHING_BUILD = """
import os, signal, sys
from pathlib import Path
from lingyi.backends.kb import KnowledgeBase, indexer
indexer.BULK = 10
real, done = indexer.Indexer._write, []
def write(self, batch, fresh):
    if len(done) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, batch, fresh)
    done.append(batch)
indexer.Indexer._write = write
KnowledgeBase(Path(sys.argv[1]), db_path=Path(sys.argv[2]), watch=False)
"""


def test_a_first_build_killed_midway_is_completed_before_it_is_served(
    kb_dir: Path, tmp_path: Path
) -> None:
    """A crash during the first build leaves only whole transactions in the index file;
    opening it again finds the files it lacks and indexes them before the first search,
    so the index served equals a clean build (documents, problems and hits)."""
    for n in range(40):
        body = f"第{n}篇文章讲气功与太极。" if n % 2 else f"Article {n} about tea and qigong."
        write_doc(kb_dir, f"m{n:02d}.md", f"kb:m-{n:03d}", f"文章{n}", body, "气")
    (kb_dir / "bad.md").write_text("没有前言的正文。\n", encoding="utf-8")
    db = tmp_path / "index.sqlite"
    run = subprocess.run([sys.executable, "-c", CRASHING_BUILD, str(kb_dir), str(db)], check=False)
    assert run.returncode == -signal.SIGKILL
    with sqlite3.connect(db) as conn:
        (half,) = conn.execute("SELECT value FROM meta WHERE key = 'docs'").fetchone()
    assert 0 < half < 44  # the crash left a part of the index
    clean = KnowledgeBase(kb_dir, watch=False)
    reopened = KnowledgeBase(kb_dir, db_path=db, watch=False)
    assert kb_state(reopened) == kb_state(clean) and len(reopened) == len(clean) == 44
    for query in ("气功", "太极", "tea", "qigong"):
        assert reopened.search(query, limit=50) == clean.search(query, limit=50), query
    # The build had put off FTS5's merging until its end: merging is on again.
    with sqlite3.connect(db) as conn:
        merging = dict(conn.execute("SELECT k, v FROM kb_fts_config"))
    assert merging.get("automerge") == 4 and merging.get("crisismerge") == 16


def test_a_first_build_in_large_transactions_equals_one_in_small_ones(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first build's transaction size changes nothing indexed: problems, duplicates
    (the first path keeps the id) and hits are those of one file per transaction."""
    (kb_dir / "bad.md").write_text("没有前言的正文。\n", encoding="utf-8")
    write_doc(kb_dir, "z.md", "kb:t-001", "另一篇", "重复的编号。")
    large = KnowledgeBase(kb_dir, watch=False)
    monkeypatch.setattr(indexer, "BULK", 1)
    small = KnowledgeBase(kb_dir, watch=False)
    assert kb_state(large) == kb_state(small)
    for query in ("量子纠缠", "气功", "tea"):
        assert large.search(query) == small.search(query), query


def kb_state(kb: KnowledgeBase) -> tuple[list[tuple[str, str, str]], list[tuple[str, int, str]]]:
    """What a KB holds: each document's id, path and title, and each problem."""
    docs = sorted((d.id, d.path, d.title) for d in map(kb.get, kb.ids()) if d)
    return docs, [(p.file, p.line, p.message) for p in kb.problems]


def test_a_large_re_index_reads_in_worker_processes(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many changed files are read and parsed by worker processes; the index is the same
    as when they are read here, problems and duplicates included."""
    (kb_dir / "bad.md").write_text("没有前言的正文。\n", encoding="utf-8")
    write_doc(kb_dir, "z.md", "kb:t-001", "另一篇", "重复的编号。")
    here = kb_state(KnowledgeBase(kb_dir, watch=False))
    monkeypatch.setattr(indexer, "PARALLEL_FROM", 1)
    monkeypatch.setattr(indexer, "_workers", lambda: 2)
    monkeypatch.setattr(indexer, "CHUNK", 2)
    assert kb_state(KnowledgeBase(kb_dir, watch=False)) == here


def test_without_workers_the_files_are_read_here(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that cannot start (or dies) is no failure: the files are read in-process."""
    here = kb_state(KnowledgeBase(kb_dir, watch=False))
    monkeypatch.setattr(indexer, "PARALLEL_FROM", 1)
    monkeypatch.setattr(indexer, "_WORKER", "import sys; sys.exit(3)")
    assert kb_state(KnowledgeBase(kb_dir, watch=False)) == here


def test_a_deployment_keeps_its_index_in_the_users_cache(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_kept: one index file per folder and domain list under $XDG_CACHE_HOME, kept
    after close, so the next start reads only what changed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kept = index_path(kb_dir, DOMAINS)
    open_kept(kb_dir, DOMAINS).close()
    assert kept.is_relative_to(tmp_path / "cache") and kept.exists()
    assert index_path(kb_dir, None) != kept
    assert len(open_kept(kb_dir, DOMAINS)) == 4


def test_a_cache_that_cannot_be_written_means_a_temporary_index(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder that cannot be created is no failure: the index is temporary."""
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    kb = open_kept(kb_dir, DOMAINS)
    assert len(kb) == 4 and not kb._store.path.is_relative_to(tmp_path)


def test_close_removes_the_temporary_index_and_stops_watching(kb_dir: Path) -> None:
    """close() (or dropping the object) stops the background thread and deletes the
    temporary index file."""
    before = {t.ident for t in threading.enumerate() if t.name == "kb-changes"}
    kb = KnowledgeBase(kb_dir)
    store = kb._store.path
    assert store.exists()
    del kb
    gc.collect()
    after = {t.ident for t in threading.enumerate() if t.name == "kb-changes"}
    assert not store.exists() and after <= before
    kb = KnowledgeBase(kb_dir)
    kb.close()
    kb.close()  # twice is harmless
    assert not kb._store.path.exists()


def test_concurrent_search_and_refresh(kb_dir: Path) -> None:
    """Searches from several threads while files change neither raise nor corrupt results."""
    kb = KnowledgeBase(kb_dir, check_interval=0)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(20):
                write_doc(kb_dir, f"w{n}.md", f"kb:w-{n}", "并发", f"并发测试第{i}次。")
                assert kb.search("量子纠缠")[0].id == "kb:t-001"
        except BaseException as exc:  # collected so the main thread can fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    kb.refresh()
    assert len(kb) == 10


# --------------------------------------------------------------------------- shipped KB


def test_shipped_kb_loads_cleanly(shipped: KnowledgeBase) -> None:
    """The packaged sample KB has no problems, >= 30 docs and >= 3 per domain."""
    assert shipped.problems == []
    assert len(shipped) >= 30
    per_domain = Counter(doc.domain for doc in map(shipped.get, shipped.ids()) if doc)
    assert set(per_domain) == set(DOMAINS) and len(DOMAINS) == 9
    assert all(n >= 3 for n in per_domain.values()), per_domain


@pytest.mark.parametrize(
    ("domains", "indexed", "problems"),
    [(None, 5, []), (("科", "气", "道"), 4, ["unknown domain '魔'; expected one of 科 气 道"])],
)
def test_the_valid_domains_are_the_deployments(
    kb_dir: Path, domains: tuple[str, ...] | None, indexed: int, problems: list[str]
) -> None:
    """The KB keeps no domain list of its own: the caller's list decides, none accepts all."""
    write_doc(kb_dir, "m.md", "kb:m-1", "魔术", "魔术史。" + FILLER, "魔")
    kb = KnowledgeBase(kb_dir, domains=domains)
    assert len(kb) == indexed and [p.message for p in kb.problems] == problems


def test_shipped_kb_required_articles(shipped: KnowledgeBase) -> None:
    """The ids the demo and docs rely on exist with their titles and key sentence."""
    origin, breath = shipped.get("kb:qg-001"), shipped.get("kb:qg-007")
    assert origin is not None and (origin.title, origin.domain) == ("气功源流", "气")
    assert breath is not None and (breath.title, breath.domain) == ("气功与呼吸", "气")
    assert "调息是气功的核心" in breath.body


def test_shipped_kb_articles_are_short_and_named_by_id(shipped: KnowledgeBase) -> None:
    """Every body is 150-400 chars and each file is named after its id."""
    for doc_id in shipped.ids():
        doc = shipped.get(doc_id)
        assert doc is not None
        assert 150 <= len(doc.body) <= 400, doc_id
        assert doc.path == doc_id.removeprefix("kb:") + ".md"
