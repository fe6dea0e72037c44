"""The knowledge base behind 灵知 (LingZhi)'s ``search_knowledge``: Markdown files in, hits out.

A folder of Markdown articles with front matter (``documents``) is indexed into SQLite FTS5
(``store``), one changed file at a time (``indexer``), as a watcher reports changes in the
background (``watch``); a search ranks a bounded set of candidates (``search``). Chinese text
is segmented into overlapping bigrams (``terms``).

The index lives in a file: a temporary one by default, or ``db_path``, which is kept and
brought up to date when the knowledge base is opened again (only changed files are read).
Nothing per document is kept in Python memory: a server's memory does not grow with the KB.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lingyi._logging import get_logger
from lingyi.backends.kb.documents import MAX_FILE_BYTES, KBDoc, KBProblem, parse_document
from lingyi.backends.kb.search import MIN_COVERAGE, KBHit, top_hits
from lingyi.backends.kb.store import Store, fingerprint
from lingyi.backends.kb.terms import SNIPPET_CHARS, make_snippet, query_terms, segment
from lingyi.errors import BackendError

if TYPE_CHECKING:
    from lingyi.backends.kb.watch import Background

log = get_logger()

__all__ = [
    "CHECK_INTERVAL_S",
    "DEFAULT_KB_DIR",
    "MAX_FILE_BYTES",
    "MIN_COVERAGE",
    "SNIPPET_CHARS",
    "KBDoc",
    "KBHit",
    "KBProblem",
    "KnowledgeBase",
    "index_path",
    "make_snippet",
    "open_kept",
    "parse_document",
    "query_terms",
    "segment",
]

DEFAULT_KB_DIR = Path(__file__).resolve().parent.parent.parent / "defaults" / "kb"
CHECK_INTERVAL_S = 300.0  # full checks behind the watcher; without one, see watch.SPACING


def index_path(folder: Path, domains: Sequence[str] | None = None) -> Path:
    """Where a deployment keeps the index of ``folder``: the user's cache
    (``$XDG_CACHE_HOME/lingyi/kb``, else ``~/.cache/lingyi/kb``), one file per folder and
    domain list, so two deployments of one folder do not rebuild each other's index."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    built_for = fingerprint(Path(folder).expanduser().resolve(), domains)
    key = hashlib.sha256(built_for.encode()).hexdigest()[:16]
    return Path(cache) / "lingyi" / "kb" / f"{key}.sqlite"


def open_kept(
    folder: Path, domains: Sequence[str] | None = None, *, watch: bool = True
) -> KnowledgeBase:
    """The knowledge base with its index kept in the user's cache (``index_path``), so that
    a restart, or a ``lingyi verify``, reads only the files that changed since. A cache that
    cannot be written means a temporary index, not a failure. ``watch``: False for a
    one-shot process, which has no use for a watcher."""
    try:
        kept = index_path(folder, domains)
        return KnowledgeBase(folder, domains=domains, db_path=kept, watch=watch)
    except (OSError, BackendError) as exc:
        if isinstance(exc, BackendError) and not isinstance(exc.__cause__, sqlite3.Error):
            raise  # the folder itself is missing: no cache would help
        log.warning("kb.index_not_kept", folder=str(folder), error=str(exc))
        return KnowledgeBase(folder, domains=domains, watch=watch)


class KnowledgeBase:
    """A folder of Markdown articles indexed for search; safe to share between threads."""

    def __init__(
        self,
        folder: Path,
        *,
        db_path: Path | None = None,
        domains: Sequence[str] | None = None,
        check_interval: float = CHECK_INTERVAL_S,
        watch: bool = True,
    ) -> None:
        """``domains``: the valid ``domain`` values (the deployment's, from the policy of the
        tool that searches this KB); None accepts any domain. ``watch``: follow changes with
        a file watcher; ``check_interval``: seconds between full checks in the background.
        The folder is indexed (or the kept index brought up to date) before this returns."""
        self._root = Path(folder).expanduser().resolve()
        if not self._root.is_dir():
            raise BackendError(f"knowledge base folder not found: {folder}")
        from lingyi.backends.kb.indexer import Indexer
        from lingyi.backends.kb.watch import Background

        temporary = None if db_path else Path(tempfile.mkdtemp(prefix="lingyi-kb-"))
        path = Path(db_path) if db_path else temporary / "index.sqlite"  # type: ignore[operator]
        self._store = _open_store(path, fingerprint(self._root, domains))
        self._indexer = Indexer(self._root, self._store, domains)
        background = Background(self._root, self._indexer, watch=watch, interval=check_interval)
        # Stopped and removed when closed, or when the object is collected without a close.
        self._close = weakref.finalize(self, _shut, background, self._store, temporary)
        self._indexer.reconcile()
        background.start()

    @property
    def folder(self) -> Path:
        return self._root

    @property
    def problems(self) -> list[KBProblem]:
        """Every file that is not indexed, in path order, with its reason."""
        from lingyi.backends.kb.documents import KBProblem
        from lingyi.backends.kb.indexer import duplicate_message

        with self._store.reading() as conn:
            rows = conn.execute(
                "SELECT f.path, coalesce(f.problem_line, f.id_line), f.problem, f.doc_id, d.path"
                " FROM files f LEFT JOIN docs d ON d.doc_id = f.doc_id"
                " WHERE f.problem IS NOT NULL OR d.path IS NOT f.path ORDER BY f.path"
            ).fetchall()
        return [
            KBProblem(file=path, line=line, message=problem or duplicate_message(doc_id, first))
            for path, line, problem, doc_id, first in rows
        ]

    def __len__(self) -> int:
        with self._store.reading() as conn:
            return int(conn.execute("SELECT value FROM meta WHERE key = 'docs'").fetchone()[0])

    def ids(self) -> set[str]:
        with self._store.reading() as conn:
            return {doc_id for (doc_id,) in conn.execute("SELECT doc_id FROM docs")}

    def get(self, doc_id: str) -> KBDoc | None:
        from lingyi.backends.kb.documents import KBDoc

        with self._store.reading() as conn:
            row = conn.execute(
                "SELECT doc_id, title, domain, tags, body, path FROM docs WHERE doc_id = ?",
                (doc_id,),
            ).fetchone()
        if row is None:
            return None
        tags = row[3].split("\n") if row[3] else []
        return KBDoc(id=row[0], title=row[1], domain=row[2], tags=tags, body=row[4], path=row[5])

    def close(self) -> None:
        self._close()

    def refresh(self) -> int:
        """Compare every file with the index now; return how many appeared, changed or went."""
        return self._indexer.reconcile()

    def search(self, query: str, limit: int = 5, domain: str | None = None) -> list[KBHit]:
        """The best ``limit`` articles for ``query`` (optionally within one domain)."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        try:
            with self._store.reading() as conn:
                return top_hits(conn, terms, limit, domain)
        except sqlite3.Error as exc:
            raise BackendError(f"knowledge base search failed: {exc}") from exc


def _open_store(path: Path, built_for: str) -> Store:
    """The index at ``path``; one that SQLite cannot read (damaged, not a database) is
    derived data: it is deleted and built again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return Store(path, built_for)
    except BackendError as exc:
        if not isinstance(exc.__cause__, sqlite3.DatabaseError) or isinstance(
            exc.__cause__, sqlite3.OperationalError
        ):
            raise
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return Store(path, built_for)


def _shut(background: Background, store: Store, temporary: Path | None) -> None:
    background.stop()
    store.close()
    if temporary is not None:
        shutil.rmtree(temporary, ignore_errors=True)
