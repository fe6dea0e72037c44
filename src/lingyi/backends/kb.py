"""The knowledge base behind 灵知 (LingZhi)'s ``search_knowledge``: Markdown files in, hits out.

Each ``*.md`` file carries a small front matter block (``key: value`` lines between ``---``
lines: ``id``, ``title``, ``domain``, ``tags: [a, b]``) followed by the body. The folder is
indexed into an SQLite FTS5 table at start and re-indexed when files change.

SQLite's ``unicode61`` tokenizer would treat a run of Chinese characters as one token, so a
two-character query such as 气功 would never match 气功源流. We therefore segment CJK text
ourselves into overlapping bigrams (plus the run's last character, so single-character prefix
queries still work) and hand FTS5 space-separated tokens. Queries are segmented the same way
and every token is quoted, so no user text ever reaches ``MATCH`` as syntax.

A document that cannot be indexed is skipped and reported as a ``KBProblem``; it never stops
the others from loading.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import BaseModel

from lingyi.errors import BackendError
from lingyi.models import Evidence
from lingyi.paths import PathOutsideRoots, resolve_inside

log = structlog.get_logger()

DEFAULT_KB_DIR = Path(__file__).resolve().parent.parent / "defaults" / "kb"

MAX_FILE_BYTES = 1_000_000  # a knowledge article is short; anything bigger is a mistake
MAX_QUERY_TERMS = 32  # bounds the cost of one MATCH
MIN_COVERAGE = 0.34  # share of query terms a hit must contain (drops one-bigram noise)
SNIPPET_CHARS = 80
SNIPPET_LEAD = 20  # characters of context kept before the first matching term
CHECK_INTERVAL_S = 1.0
# bm25 weights per FTS column: doc_id, domain, title, tags, body.
_BM25 = "bm25(kb_fts, 0.0, 0.0, 10.0, 4.0, 1.0)"

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")
_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")
_ID_RE = re.compile(r"^kb:[A-Za-z0-9][A-Za-z0-9_.-]*$")
_REQUIRED = ("id", "title", "domain")


class KBDoc(BaseModel):
    """One indexed article; ``path`` is relative to the knowledge-base folder."""

    id: str
    title: str
    domain: str
    tags: list[str]
    body: str
    path: str


class KBHit(BaseModel):
    """One search result; ``score`` is higher for better matches."""

    id: str
    title: str
    domain: str
    tags: list[str]
    snippet: str
    score: float

    def to_evidence(self) -> Evidence:
        """The hit as the evidence the server records for the session."""
        return Evidence(id=self.id, title=self.title, snippet=self.snippet, url=None)


class KBProblem(BaseModel):
    """A file that could not be indexed; ``line`` 0 means the file as a whole."""

    file: str
    line: int
    message: str


@dataclass(frozen=True)
class _Parsed:
    doc: KBDoc
    id_line: int  # kept so a duplicate id can be reported where it is written


@dataclass(frozen=True)
class _Term:
    text: str
    prefix: bool  # a lone CJK character: matches every indexed token that starts with it

    def match_expr(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + " *" if self.prefix else quoted

    def found_in(self, tokens: frozenset[str]) -> bool:
        if not self.prefix:
            return self.text in tokens
        return any(token.startswith(self.text) for token in tokens)


# --------------------------------------------------------------------------- segmentation


def segment(text: str, *, for_index: bool = True) -> list[str]:
    """Split text into search tokens: lowercase words and overlapping CJK bigrams.

    For the index, each CJK run also yields its last character, so that every character of
    the run starts some token and a one-character query can be answered as a prefix query.
    """
    tokens: list[str] = []
    for run in _TOKEN_RE.findall(text):
        if not _CJK_RE.match(run):
            tokens.append(run.lower())
        elif len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
            if for_index:
                tokens.append(run[-1])
    return tokens


def query_terms(query: str) -> list[_Term]:
    """The distinct terms of a query, in order, capped at ``MAX_QUERY_TERMS``."""
    terms: list[_Term] = []
    seen: set[str] = set()
    for token in segment(query, for_index=False):
        if token not in seen:
            seen.add(token)
            terms.append(_Term(token, prefix=len(token) == 1 and bool(_CJK_RE.match(token))))
    return terms[:MAX_QUERY_TERMS]


# --------------------------------------------------------------------------- front matter


def parse_document(text: str, path: str, domains: Sequence[str] | None) -> _Parsed | KBProblem:
    """Parse one Markdown file with front matter, or say what is wrong and on which line."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return KBProblem(file=path, line=1, message="missing front matter: first line must be ---")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        return KBProblem(file=path, line=1, message="front matter is not closed by a --- line")
    fields = _parse_fields(lines[1:end], path)
    if isinstance(fields, KBProblem):
        return fields
    body = "\n".join(lines[end + 1 :]).strip()
    return _build_doc(fields, body, path, domains)


def _parse_fields(lines: list[str], path: str) -> dict[str, tuple[str, int]] | KBProblem:
    """``key: value`` lines into ``{key: (raw value, line number)}``."""
    fields: dict[str, tuple[str, int]] = {}
    for lineno, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KEY_RE.match(line.strip())
        if m is None:
            return KBProblem(file=path, line=lineno, message=f"expected 'key: value': {line!r}")
        key = m.group(1).lower()
        if key in fields:
            return KBProblem(file=path, line=lineno, message=f"duplicate key {key!r}")
        fields[key] = (m.group(2).strip(), lineno)
    return fields


def _build_doc(
    fields: dict[str, tuple[str, int]], body: str, path: str, domains: Sequence[str] | None
) -> _Parsed | KBProblem:
    for key in _REQUIRED:
        if not _unquote(fields.get(key, ("", 0))[0]):
            return KBProblem(file=path, line=1, message=f"front matter has no {key!r}")
    doc_id, id_line = _unquote(fields["id"][0]), fields["id"][1]
    if not _ID_RE.match(doc_id):
        msg = f"id {doc_id!r} must look like kb:<name> (letters, digits, - _ .)"
        return KBProblem(file=path, line=id_line, message=msg)
    domain, domain_line = _unquote(fields["domain"][0]), fields["domain"][1]
    if domains is not None and domain not in domains:
        msg = f"unknown domain {domain!r}; expected one of {' '.join(domains)}"
        return KBProblem(file=path, line=domain_line, message=msg)
    tags = _parse_tags(*fields.get("tags", ("[]", 1)), path)
    if isinstance(tags, KBProblem):
        return tags
    title = _unquote(fields["title"][0])
    doc = KBDoc(id=doc_id, title=title, domain=domain, tags=tags, body=body, path=path)
    return _Parsed(doc=doc, id_line=id_line)


def _parse_tags(raw: str, lineno: int, path: str) -> list[str] | KBProblem:
    if not (raw.startswith("[") and raw.endswith("]")):
        return KBProblem(file=path, line=lineno, message="tags must be a list like [a, b]")
    items = (_unquote(item) for item in raw[1:-1].split(","))
    return [item for item in items if item]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value


# --------------------------------------------------------------------------- snippets


def make_snippet(body: str, terms: Sequence[_Term], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of the body around the first term it contains."""
    text = re.sub(r"\s+", " ", re.sub(r"(?m)^#+\s*", "", body)).strip()
    lowered = text.lower()
    hits = [pos for pos in (lowered.find(t.text) for t in terms) if pos >= 0]
    start = max(0, min(hits) - SNIPPET_LEAD) if hits else 0
    start = max(0, min(start, len(text) - width))
    window = text[start : start + width].strip()
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(text) else ""
    return prefix + window + suffix


# --------------------------------------------------------------------------- the index


class KnowledgeBase:
    """A folder of Markdown articles indexed for search; safe to share between threads."""

    def __init__(
        self,
        folder: Path,
        *,
        db_path: Path | None = None,
        domains: Sequence[str] | None = None,
        check_interval: float = CHECK_INTERVAL_S,
    ) -> None:
        """``domains``: the valid ``domain`` values (the deployment's, from the policy of the
        tool that searches this KB); None accepts any domain."""
        self._root = Path(folder).expanduser().resolve()
        if not self._root.is_dir():
            raise BackendError(f"knowledge base folder not found: {folder}")
        self._domains = tuple(domains) if domains is not None else None
        self._check_interval = check_interval
        self._lock = threading.Lock()
        self._conn = _open_db(db_path)
        self._signatures: dict[str, tuple[int, int]] = {}
        self._loaded: dict[str, _Parsed | KBProblem] = {}
        self._docs: dict[str, KBDoc] = {}
        self._tokens: dict[str, frozenset[str]] = {}
        self._problems: list[KBProblem] = []
        self._last_check = 0.0
        self.refresh()

    @property
    def folder(self) -> Path:
        return self._root

    @property
    def problems(self) -> list[KBProblem]:
        with self._lock:
            return list(self._problems)

    def __len__(self) -> int:
        with self._lock:
            return len(self._docs)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._docs)

    def get(self, doc_id: str) -> KBDoc | None:
        with self._lock:
            return self._docs.get(doc_id)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def refresh(self) -> int:
        """Re-read files that appeared, changed or disappeared; return how many did."""
        with self._lock:
            self._last_check = time.monotonic()
            current = self._scan()
            changed = {p for p, sig in current.items() if self._signatures.get(p) != sig}
            changed |= self._signatures.keys() - current.keys()
            for rel in changed:
                self._reload(rel, present=rel in current)
            self._signatures = current
            if changed:
                self._rebuild()
                log.info("kb.indexed", folder=str(self._root), changed=len(changed),
                         docs=len(self._docs), problems=len(self._problems))  # fmt: skip
            return len(changed)

    def search(self, query: str, limit: int = 5, domain: str | None = None) -> list[KBHit]:
        """The best ``limit`` articles for ``query`` (optionally within one domain)."""
        self._maybe_refresh()
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        expr = " OR ".join(term.match_expr() for term in terms)
        with self._lock:
            rows = self._match(expr, domain, candidates=max(limit * 10, 50))
            hits = [self._hit(doc_id, -rank, terms) for doc_id, rank in rows]
        ranked = sorted((h for h in hits if h is not None), key=lambda h: -h.score)
        return ranked[:limit]

    # -- internals (callers hold self._lock) ------------------------------------------------

    def _maybe_refresh(self) -> None:
        # Cheap enough to run per search, but not on every call of a busy server.
        if time.monotonic() - self._last_check >= self._check_interval:
            try:
                self.refresh()
            except (OSError, sqlite3.Error) as exc:
                log.warning("kb.refresh_failed", folder=str(self._root), error=str(exc))

    def _scan(self) -> dict[str, tuple[int, int]]:
        """Every visible ``*.md`` file under the folder with its (mtime_ns, size)."""
        found: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self._root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                if name.lower().endswith(".md") and not name.startswith("."):
                    path = Path(dirpath) / name
                    sig = _signature(path)
                    if sig is not None:
                        found[path.relative_to(self._root).as_posix()] = sig
        return found

    def _reload(self, rel: str, *, present: bool) -> None:
        if present:
            self._loaded[rel] = self._load(rel)
        else:
            self._loaded.pop(rel, None)

    def _load(self, rel: str) -> _Parsed | KBProblem:
        try:
            real = resolve_inside(self._root / rel, [self._root])
        except PathOutsideRoots:
            return KBProblem(file=rel, line=0, message="symlink resolves outside the folder")
        if not real.is_file():
            return KBProblem(file=rel, line=0, message="not a regular file")
        try:
            if real.stat().st_size > MAX_FILE_BYTES:
                return KBProblem(file=rel, line=0, message=f"larger than {MAX_FILE_BYTES} bytes")
            text = real.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            return KBProblem(file=rel, line=0, message=f"cannot read: {exc}")
        return parse_document(text, rel, self._domains)

    def _rebuild(self) -> None:
        """Rebuild the index from the parsed files; first path (sorted) wins a duplicate id."""
        docs: dict[str, KBDoc] = {}
        problems: list[KBProblem] = []
        for rel in sorted(self._loaded):
            item = self._loaded[rel]
            if isinstance(item, KBProblem):
                problems.append(item)
            elif item.doc.id in docs:
                msg = f"duplicate id {item.doc.id!r}, already used by {docs[item.doc.id].path}"
                problems.append(KBProblem(file=rel, line=item.id_line, message=msg))
            else:
                docs[item.doc.id] = item.doc
        self._write_index(docs.values())
        self._docs, self._problems = docs, problems
        self._tokens = {doc_id: _doc_tokens(doc) for doc_id, doc in docs.items()}
        for problem in problems:
            log.warning("kb.problem", file=problem.file, line=problem.line, message=problem.message)

    def _write_index(self, docs: Iterable[KBDoc]) -> None:
        rows = [(d.id, d.domain, _seg(d.title), _seg(" ".join(d.tags)), _seg(d.body)) for d in docs]
        try:
            with self._conn:
                self._conn.execute("DELETE FROM kb_fts")
                self._conn.executemany("INSERT INTO kb_fts VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise BackendError(f"cannot index knowledge base {self._root}: {exc}") from exc

    def _match(self, expr: str, domain: str | None, candidates: int) -> list[tuple[str, float]]:
        sql = (
            f"SELECT doc_id, {_BM25} AS rank FROM kb_fts WHERE kb_fts MATCH ?"
            " AND (? IS NULL OR domain = ?) ORDER BY rank LIMIT ?"
        )
        try:
            cursor = self._conn.execute(sql, (expr, domain, domain, candidates))
            return [(str(doc_id), float(rank)) for doc_id, rank in cursor]
        except sqlite3.Error as exc:
            log.error("kb.search_failed", expr=expr, error=str(exc))
            raise BackendError(f"knowledge base search failed: {exc}") from exc

    def _hit(self, doc_id: str, relevance: float, terms: Sequence[_Term]) -> KBHit | None:
        """Score one candidate, or drop it when it shares too few of the query's terms."""
        doc, tokens = self._docs.get(doc_id), self._tokens.get(doc_id, frozenset())
        coverage = sum(term.found_in(tokens) for term in terms) / len(terms)
        if doc is None or coverage < MIN_COVERAGE:
            return None
        # Squared so that matching every term beats repeating a few of them.
        score = round(relevance * coverage**2, 6)
        snippet = make_snippet(doc.body, terms)
        return KBHit(id=doc.id, title=doc.title, domain=doc.domain, tags=doc.tags,
                     snippet=snippet, score=score)  # fmt: skip


def _open_db(db_path: Path | None) -> sqlite3.Connection:
    """The index is derived data: an existing table is dropped and rebuilt at start."""
    try:
        conn = sqlite3.connect(str(db_path) if db_path else ":memory:", check_same_thread=False)
        conn.execute("DROP TABLE IF EXISTS kb_fts")
        conn.execute(
            "CREATE VIRTUAL TABLE kb_fts USING fts5("
            "doc_id UNINDEXED, domain UNINDEXED, title, tags, body, tokenize='unicode61')"
        )
    except sqlite3.Error as exc:
        raise BackendError(f"cannot open knowledge base index {db_path}: {exc}") from exc
    return conn


def _signature(path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size) of the file, or of the link itself when its target is missing."""
    for stat in (path.stat, path.lstat):
        try:
            st = stat()
        except OSError:
            continue
        return (st.st_mtime_ns, st.st_size)
    return None  # vanished between listing and stat


def _seg(text: str) -> str:
    return " ".join(segment(text))


def _doc_tokens(doc: KBDoc) -> frozenset[str]:
    return frozenset(segment(" ".join([doc.title, *doc.tags, doc.body])))
