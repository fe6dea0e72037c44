"""Canonical forms of lexicon terms kept across starts: the same automaton, less work.

What it must hold: a matcher built from kept forms finds exactly what one built from scratch
finds (Chinese and English, traditional and full-width terms); forms made under another key
(another Python, OpenCC or canonical code), a corrupt file, or one others may write are never
used. Real files in the test session's $XDG_CACHE_HOME (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lingyi.text import TermMatcher, _forms, canonical_text

GROUPS = {"道": ["道德經", "Ｚｈｕａｎｇｚｉ", "Taoism*"], "医": ["針灸", "acupuncture"]}
TEXTS = ["庄子讲逍遥", "zhuangzi and taoists", "针灸 acupuncture", "知道了", "TAOISM"]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder of this test's own, and no forms read yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _forms._kept.cache_clear()
    yield _forms._path()
    _forms._kept.cache_clear()


def found(matcher: TermMatcher) -> list[list[tuple[str, int, int]]]:
    return [[(h.term, h.start, h.end) for h in matcher.find(canonical_text(t))] for t in TEXTS]


def test_kept_forms_build_the_same_matcher_without_computing_any(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first build keeps its forms (a private file); a later start builds the same
    matcher from them alone, and it finds the same terms at the same places."""
    expected = found(TermMatcher(GROUPS))
    assert fresh.is_file() and any(e for e in expected)
    if os.name != "nt":
        assert fresh.stat().st_mode & 0o077 == 0
    _forms._kept.cache_clear()

    def refuse(text: str) -> str:
        raise AssertionError(f"computed {text!r} again")

    monkeypatch.setattr(_forms, "canonical_text", refuse)
    assert found(TermMatcher(GROUPS)) == expected


def _poisoned(path: Path) -> None:
    """Kept forms that would make 针灸 unmatchable, if they were used."""
    data = json.loads(path.read_bytes())
    data["entries"] = {k: "zzz" for k in data["entries"]}
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("spoil", ["other key", "corrupt", "others may write"])
def test_forms_of_another_key_corrupt_or_writable_by_others_are_not_used(
    fresh: Path, spoil: str
) -> None:
    """Each of these is ignored: the forms are computed again and match as before."""
    if spoil == "others may write" and os.name == "nt":
        pytest.skip("POSIX permission bits")
    expected = found(TermMatcher(GROUPS))
    _poisoned(fresh)
    if spoil == "other key":
        data = json.loads(fresh.read_bytes())
        fresh.write_text(json.dumps({**data, "key": "canonical 0|old"}), encoding="utf-8")
    elif spoil == "corrupt":
        fresh.write_bytes(b'{"key": ')
    else:
        os.chmod(fresh, 0o666)
    _forms._kept.cache_clear()
    assert found(TermMatcher(GROUPS)) == expected


@pytest.mark.parametrize(
    ("groups", "reads"),
    [({}, 0), ({"道": []}, 0), ({"道": ["知道"]}, 1), ({"en": ["Taoism*"]}, 1)],
    ids=["no-group", "no-term", "zh-term", "en-term"],
)
def test_only_a_matcher_with_terms_reads_the_kept_forms(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, groups: dict[str, list[str]], reads: int
) -> None:
    """A matcher of no terms (a check module builds one at import, for an unset lexicon)
    reads no kept forms and finds nothing; one with terms, Chinese or English, reads them."""
    TermMatcher(GROUPS)  # the forms are kept
    _forms._kept.cache_clear()
    read: list[Path] = []
    monkeypatch.setattr(_forms, "read_private", lambda path, key: read.append(path) or {})
    matcher = TermMatcher(groups)
    assert len(read) == reads
    assert any(found(matcher)) == bool(reads)
