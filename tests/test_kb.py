"""The knowledge-base backend: indexing, Chinese segmentation, search, refresh, problems."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from lingyi.backends.kb import (
    DEFAULT_KB_DIR,
    KBHit,
    KnowledgeBase,
    segment,
)
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
    kb = KnowledgeBase(kb_dir, check_interval=3600)
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


def test_search_picks_up_changes_without_restart(kb_dir: Path) -> None:
    """search() runs the change check itself once the throttle interval has passed."""
    kb = KnowledgeBase(kb_dir, check_interval=0)
    write_doc(kb_dir, "new.md", "kb:t-009", "咏春拳", "咏春拳重视中线。", "武")
    assert [h.id for h in kb.search("咏春拳")] == ["kb:t-009"]


def test_change_check_is_throttled(kb_dir: Path) -> None:
    """Within the interval search() does not rescan; refresh() always does."""
    kb = KnowledgeBase(kb_dir, check_interval=3600)
    write_doc(kb_dir, "new.md", "kb:t-009", "咏春拳", "咏春拳重视中线。", "武")
    assert kb.search("咏春拳") == []
    assert kb.refresh() == 1
    assert [h.id for h in kb.search("咏春拳")] == ["kb:t-009"]


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
    """With db_path the index is a file; opening it again rebuilds rather than duplicates."""
    db = tmp_path / "index.sqlite"
    KnowledgeBase(kb_dir, db_path=db).close()
    kb = KnowledgeBase(kb_dir, db_path=db)
    assert db.exists()
    assert [h.id for h in kb.search("量子纠缠")] == ["kb:t-001", "kb:t-002"]


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
