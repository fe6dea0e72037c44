"""Searching the index in two phases, so that ranking stops at the limit.

1. Candidates, cheaply: FTS5 returns matching rowids in index order and stops at a LIMIT,
   so a term found in 70,000 documents costs no more than one found in 70. The candidates
   are gathered tier by tier, best first: every term in the title or tags, every term
   anywhere, then (for several terms) any of the rarest terms in the title or tags, then
   anywhere. A hit must contain a third of the terms, so it contains one of the
   ``n - m + 1`` rarest (``m`` terms needed): the last tiers miss no possible hit.
2. The final score of those candidates only: bm25 as FTS5 computes it (title 10, tags 4,
   body 1; k1 1.2, b 0.75) from term counts in the stored text, times the squared share of
   the query's terms the document contains. Snippets are made for the hits returned.

When every match fits in the candidates (a small KB, or a rare term), the result is the
exhaustive ranking. Beyond that, a tier holding more candidates than needed is cut in index
order: the hits are the best of the first candidates of the best tier, not of all its
documents. Document frequencies (bm25's idf) are counted up to ``DF_SAMPLE`` and, past
that, extrapolated from where in the index the sample ended.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from pydantic import BaseModel

from lingyi.backends.kb.store import domain_token
from lingyi.backends.kb.terms import Term, make_snippet
from lingyi.models import Evidence

MIN_COVERAGE = 0.34  # share of query terms a hit must contain (drops one-bigram noise)
DF_SAMPLE = 1000  # matches counted per term for its idf; more are extrapolated
K1, B = 1.2, 0.75  # FTS5's bm25 constants
WEIGHTS = (10.0, 4.0, 1.0)  # title, tags, body
_TEXT = "{title tags body}"  # terms never match the domain column
_HEAD = "{title tags}"


class KBHit(BaseModel):
    """One search result; ``score`` is higher for better matches."""

    id: str
    title: str
    domain: str
    tags: list[str]
    snippet: str
    score: float
    url: str | None = None  # the document's stable URL, once a base is given (with_url)

    def with_url(self, base: str) -> KBHit:
        """The hit with its document's URL under ``base`` (none when ``base`` is empty)."""
        return self.model_copy(update={"url": document_url(base, self.id)}) if base else self

    def to_evidence(self) -> Evidence:
        """The hit as the evidence the server records for the session."""
        return Evidence(id=self.id, title=self.title, snippet=self.snippet, url=self.url)


def document_url(base: str, doc_id: str) -> str:
    """A document's stable URL: ``base`` + its id without the ``kb:`` prefix, percent-encoded
    (``https://kb.example.org/`` + ``kb:qg-001`` → ``https://kb.example.org/qg-001``), so that
    an answer can cite it and the ledger finds it again."""
    return base.rstrip("/") + "/" + quote(doc_id.removeprefix("kb:"), safe="-._~")


@dataclass(frozen=True)
class _Stats:
    docs: int
    avgdl: float
    lo: int  # smallest and largest rowid in use
    hi: int


def top_hits(
    conn: sqlite3.Connection, terms: Sequence[Term], limit: int, domain: str | None
) -> list[KBHit]:
    """The best ``limit`` documents for ``terms``; ``conn`` is in a read transaction."""
    stats = _stats(conn)
    if stats.docs == 0:
        return []
    df = [_doc_frequency(conn, term, stats) for term in terms]
    rows = _rows(conn, _candidates(conn, terms, df, domain, max(limit * 10, 50)))
    idf = [_idf(stats.docs, n) for n in df]
    scored = [(s, row) for row in rows if (s := _score(row, terms, idf, stats)) is not None]
    # Equal scores (rounded) keep bm25's order, then the path's: the order FTS5 ranked in.
    scored.sort(key=lambda pair: (-pair[0][0], -pair[0][1], pair[1][2]))
    return [_hit(row, score, terms) for (score, _), row in scored[:limit]]


# --------------------------------------------------------------------------- phase 1


def _candidates(
    conn: sqlite3.Connection, terms: Sequence[Term], df: list[int], domain: str | None, k: int
) -> list[int]:
    present = sorted((n, i) for i, n in enumerate(df) if n > 0)
    needed = math.ceil(MIN_COVERAGE * len(terms) - 1e-9)
    if len(present) < max(1, needed):
        return []  # no document can contain enough of the terms
    rarest = [terms[i] for _, i in present[: len(present) - needed + 1]]
    every = " AND ".join(t.match_expr() for t in terms) if len(present) == len(terms) else None
    some = " OR ".join(t.match_expr() for t in rarest)
    tiers = [(_HEAD, every), (_TEXT, every)]
    if some != every:
        tiers += [(_HEAD, some), (_TEXT, some)]
    found: list[int] = []
    for columns, expr in tiers:
        if expr is not None and len(found) < k:
            found += _tier(conn, _match(columns, expr, domain), found, k - len(found))
    return found


def _match(columns: str, expr: str, domain: str | None) -> str:
    text = f"{columns} : ({expr})"
    return f'dom : "{domain_token(domain)}" AND {text}' if domain is not None else text


def _tier(conn: sqlite3.Connection, match: str, seen: list[int], want: int) -> list[int]:
    marks = ",".join("?" * len(seen))
    sql = f"SELECT rowid FROM kb_fts WHERE kb_fts MATCH ? AND rowid NOT IN ({marks}) LIMIT ?"
    return [rowid for (rowid,) in conn.execute(sql, (match, *seen, want))]


def _stats(conn: sqlite3.Connection) -> _Stats:
    # One subquery per end of the b-tree: min() and max() in one SELECT scan the whole table.
    docs, tokens, lo, hi = conn.execute(
        "SELECT (SELECT value FROM meta WHERE key = 'docs'),"
        " (SELECT value FROM meta WHERE key = 'tokens'),"
        " (SELECT min(rowid) FROM docs), (SELECT max(rowid) FROM docs)"
    ).fetchone()
    docs = int(docs)
    return _Stats(docs, int(tokens) / docs if docs else 0.0, lo or 0, hi or 0)


def _doc_frequency(conn: sqlite3.Connection, term: Term, stats: _Stats) -> int:
    """How many documents contain ``term``: counted up to DF_SAMPLE, then extrapolated."""
    sample = "SELECT rowid FROM kb_fts WHERE kb_fts MATCH ? LIMIT ?"
    count, last = conn.execute(
        f"SELECT count(*), max(rowid) FROM ({sample})",
        (f"{_TEXT} : {term.match_expr()}", DF_SAMPLE),
    ).fetchone()
    if count < DF_SAMPLE:
        return int(count)
    share = (int(last) - stats.lo + 1) / (stats.hi - stats.lo + 1)  # of the index the sample read
    return min(stats.docs, round(int(count) / share))


# --------------------------------------------------------------------------- phase 2

_Row = tuple[int, str, str, str, str, str, str, int]


def _rows(conn: sqlite3.Connection, rowids: list[int]) -> list[_Row]:
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    sql = (
        "SELECT rowid, doc_id, path, title, domain, tags, body, ntok FROM docs"
        f" WHERE rowid IN ({marks})"
    )
    return list(conn.execute(sql, rowids))


def _idf(docs: int, hits: int) -> float:
    idf = math.log((docs - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6  # as FTS5 does


def _score(
    row: _Row, terms: Sequence[Term], idf: list[float], stats: _Stats
) -> tuple[float, float] | None:
    """(bm25 × coverage², bm25), or None when the document has too few of the terms."""
    fields = (row[3], row[5].replace("\n", " "), row[6])  # title, tags, body
    # Words are matched lowercased; CJK terms have no case (most queries skip lower()).
    lowered = tuple(f.lower() for f in fields) if any(t.kind == "word" for t in terms) else fields
    norm = K1 * (1 - B + B * row[7] / stats.avgdl)
    relevance, found = 0.0, 0
    for term, weight in zip(terms, idf, strict=True):
        freq = 0.0
        for w, text, low in zip(WEIGHTS, fields, lowered, strict=True):
            freq += w * term.count_in(text, low)
        if freq:
            found += 1
            relevance += weight * freq * (K1 + 1) / (freq + norm)
    coverage = found / len(terms)
    if coverage < MIN_COVERAGE:
        return None
    # Squared so that matching every term beats repeating a few of them.
    return round(relevance * coverage**2, 6), relevance


def _hit(row: _Row, score: float, terms: Sequence[Term]) -> KBHit:
    tags = row[5].split("\n") if row[5] else []
    snippet = make_snippet(row[6], terms)
    return KBHit(id=row[1], title=row[3], domain=row[4], tags=tags, snippet=snippet, score=score)
