"""A reproducible knowledge base of N documents of about 900 bytes, for ``bench_kb.py``.

Realistic enough to measure search on: Chinese documents (four in five) mix sentences of the
shipped sample articles, so real terms such as 气功 or 道家 are as common as they would be in a
KB about these topics, with pseudo-words drawn from a Zipf distribution over the characters
of those articles, so the index holds the long tail of distinct bigrams a real corpus has.
English documents do the same with the shipped English articles and pseudo-words.
Files are spread over 100 folders, as a large KB would be.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent.parent / "src" / "lingyi" / "defaults" / "kb"
DOMAINS = ("儒", "释", "道", "医", "武", "心", "哲", "科", "气")
TARGET_BYTES = 900
FOLDERS = 100
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE = re.compile(r"[^。！？.!?]+[。！？.!?]")
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


class Corpus:
    """Sentences and vocabularies taken from the shipped articles; documents made from them."""

    def __init__(self, seed: int = 10) -> None:
        self.rng = random.Random(seed)
        bodies, self.titles, self.tags = _shipped()
        zh = [s for b in bodies for s in _SENTENCE.findall(b) if _CJK.search(s)]
        en = [s.strip() for b in bodies for s in _SENTENCE.findall(b) if not _CJK.search(s)]
        self.zh_sentences, self.en_sentences = zh, en
        chars = Counter(c for s in zh for c in s if _CJK.match(c))
        self.chars = [c for c, _ in chars.most_common()]
        self.zh_words = self._zipf_words(lambda r: _pick(r, self.chars) + _pick(r, self.chars))
        self.en_words = self._zipf_words(
            lambda r: "".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 3)))
        )

    def _zipf_words(self, make: Callable[[random.Random], str], n: int = 20_000) -> list[str]:
        """n distinct pseudo-words; callers draw them with a Zipf-like rank distribution."""
        words: dict[str, None] = {}
        while len(words) < n:
            words[make(self.rng)] = None
        return list(words)

    def document(self, i: int) -> tuple[str, str]:
        """(relative path, file text) of document ``i``."""
        english = i % 5 == 4
        title = self._title(english)
        tags = [*self.rng.sample(self.tags, 2), self._word(english)]
        body = self._body(english)
        domain = DOMAINS[i % len(DOMAINS)]
        text = (
            f"---\nid: kb:bench-{i:06d}\ntitle: {title}\ndomain: {domain}\n"
            f"tags: [{', '.join(tags)}]\n---\n{body}\n"
        )
        return f"f{i % FOLDERS:02d}/doc-{i:06d}.md", text

    def _title(self, english: bool) -> str:
        base = self.rng.choice(self.titles)
        return f"{base} {self._word(english)}" if english else base + self._word(english)

    def _body(self, english: bool) -> str:
        parts: list[str] = []
        size = 0
        while size < TARGET_BYTES - 150:
            part = self._sentence(english)
            parts.append(part)
            size += len(part.encode()) + (1 if english else 0)
        return (" " if english else "").join(parts)

    def _sentence(self, english: bool) -> str:
        if self.rng.random() < 0.5:
            return self.rng.choice(self.en_sentences if english else self.zh_sentences)
        words = [self._word(english) for _ in range(self.rng.randint(4, 9))]
        return " ".join(words).capitalize() + "." if english else "".join(words) + "。"

    def _word(self, english: bool) -> str:
        return _pick(self.rng, self.en_words if english else self.zh_words)


def _pick(rng: random.Random, items: list[str]) -> str:
    """An item with probability about 1/rank (a Zipf distribution with s = 1)."""
    rank = int(len(items) ** rng.random())  # log-uniform rank in [1, len): P(rank) ~ 1/rank
    return items[rank - 1]


def _shipped() -> tuple[list[str], list[str], list[str]]:
    bodies, titles, tags = [], [], []
    for path in sorted(SHIPPED.glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
        fields = dict(line.split(": ", 1) for line in front.splitlines() if ": " in line)
        bodies.append(body.strip())
        titles.append(fields["title"].strip('"'))
        tags.extend(t.strip() for t in fields.get("tags", "[]").strip("[]").split(","))
    return bodies, titles, [t for t in tags if t]


def write_corpus(folder: Path, n: int, seed: int = 10) -> Path:
    """Write the n documents under ``folder`` (once: an existing complete corpus is reused)."""
    stamp = folder / f".complete-{n}-{seed}"
    if stamp.exists():
        return folder
    corpus = Corpus(seed)
    for i in range(n):
        rel, text = corpus.document(i)
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    stamp.touch()
    return folder


def query_terms(seed: int = 10) -> dict[str, list[str]]:
    """The timed queries: 2-character Chinese terms and English words (the targets), common
    and rare, and longer queries of several terms (titles and tags of the sample KB)."""
    corpus = Corpus(seed)
    real_zh = sorted({t for t in corpus.tags + corpus.titles if len(t) == 2 and _CJK.match(t)})
    ranks = (1, 2, 3, 5, 10, 30, 100, 300, 1000, 5000)
    zh = real_zh[:20] + [corpus.zh_words[r - 1] for r in ranks]
    en_counts = Counter(
        w.lower() for s in corpus.en_sentences for w in re.findall(r"[A-Za-z]+", s) if len(w) > 3
    )
    en = [w for w, _ in en_counts.most_common(20)] + [corpus.en_words[r - 1] for r in ranks]
    longer = sorted(
        {t for t in corpus.tags + corpus.titles if len(t) > 2 and (" " in t or _CJK.match(t))}
    )
    return {"zh2": zh, "en": en, "multi": longer[:: max(1, len(longer) // 20)][:20]}


def sizes(folder: Path) -> tuple[int, float]:
    """(files, mean bytes) of the corpus, for the report."""
    files = list(itertools.islice(folder.rglob("*.md"), 2000))
    return len(files), sum(f.stat().st_size for f in files) / max(1, len(files))
