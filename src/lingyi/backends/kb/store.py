"""The index file: SQLite holds every document, every file's state and the FTS5 index.

Nothing about a document is kept in Python between calls. One connection writes (the
indexer's, behind its lock); searches read through connections of their own, so in WAL mode
they keep being answered, on the last committed state, while a file is re-indexed.

The FTS5 table is contentless (the text is stored once, in ``docs``) and keeps no positions
(``detail=column``): no query needs phrases, and the final ranking counts terms in the stored
text. Its tokenizer is ``ascii`` because the tokens are ours (``terms.segment``): it splits on
our spaces and keeps every non-ASCII character, so a token matches exactly what we indexed.
The domain is indexed as one token of its own, so a domain filter is part of the MATCH.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from lingyi.errors import BackendError

SCHEMA_VERSION = 2  # bump when the tables or the tokens change: an older index is rebuilt

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    # One row per visible *.md file: its signature, and either the id it declares (a doc, or
    # a duplicate of one) or why it cannot be indexed.
    "CREATE TABLE files (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER,"
    " doc_id TEXT, id_line INTEGER, problem_line INTEGER, problem TEXT) WITHOUT ROWID",
    "CREATE INDEX files_by_doc ON files (doc_id, path) WHERE doc_id IS NOT NULL",
    # The documents in effect; rowid is the FTS rowid. tags: one per line. ntok: tokens of
    # title, tags and body together (the document length of bm25).
    "CREATE TABLE docs (rowid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE,"
    " path TEXT NOT NULL, title TEXT, domain TEXT, tags TEXT, body TEXT, ntok INTEGER)",
    "CREATE VIRTUAL TABLE kb_fts USING fts5(dom, title, tags, body,"
    " content='', columnsize=0, detail=column, tokenize='ascii')",
    "INSERT INTO meta VALUES ('docs', 0), ('tokens', 0)",
)
_TABLES = ("meta", "files", "docs", "kb_fts")
PENDING_BYTES = 16 << 20


def fingerprint(root: Path, domains: Sequence[str] | None) -> str:
    """What the index was built for: another folder, domain list or schema means rebuild."""
    return json.dumps([SCHEMA_VERSION, str(root), None if domains is None else list(domains)])


def domain_token(domain: str) -> str:
    """The domain as one ASCII token, whatever characters the deployment's domains use."""
    return "d" + domain.encode("utf-8").hex()


class Store:
    """The SQLite file of one knowledge base; safe to share between threads."""

    def __init__(self, path: Path, built_for: str) -> None:
        self.path = path
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()
        try:
            self._writer = self._connect()
            self._prepare(built_for)
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open knowledge base index {path}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are ours (BEGIN ... COMMIT), never implicit.
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 10000")  # another process may be writing
        with self._opened_lock:
            self._opened.append(conn)
        return conn

    def _prepare(self, built_for: str) -> None:
        conn = self._writer
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # derived data: a lost commit is re-read
        with self.writing() as cur:
            if _built_for(cur) != built_for:
                for table in _TABLES:
                    cur.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in _SCHEMA:
                    cur.execute(statement)
                cur.execute("INSERT INTO meta VALUES ('built_for', ?)", (built_for,))
                _pending_size(cur)
            elif _merging_deferred(cur):  # a first build stopped before its end
                defer_merging(cur, False)

    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction; callers serialise (the indexer's lock)."""
        cur = self._writer.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A connection in a read transaction: one consistent snapshot for a whole search."""
        try:
            conn = self._readers.get_nowait()
        except queue.Empty:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
            self._readers.put(conn)

    def close(self) -> None:
        with self._opened_lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()


def _built_for(cur: sqlite3.Cursor) -> str | None:
    try:
        row = cur.execute("SELECT value FROM meta WHERE key = 'built_for'").fetchone()
    except sqlite3.OperationalError:  # no such table: a new file
        return None
    return str(row[0]) if row else None


def _pending_size(cur: sqlite3.Cursor) -> None:
    """Let FTS5 hold 16 MB of new postings in memory before it writes a segment (1 MB by
    default): a first build then writes one segment per transaction instead of dozens to be
    merged later. A one-file update commits (and writes) long before that. An SQLite that
    does not know the option builds the same index, more slowly."""
    with contextlib.suppress(sqlite3.OperationalError):
        cur.execute("INSERT INTO kb_fts (kb_fts, rank) VALUES ('hashsize', ?)", (PENDING_BYTES,))


_BULK_MERGING = (("automerge", 0), ("crisismerge", 1999))  # no merge until 'optimize'
_MERGING = (("automerge", 4), ("crisismerge", 16))  # FTS5's defaults


def defer_merging(cur: sqlite3.Cursor, defer: bool) -> None:
    """During a first build, let FTS5 pile up its segments and merge them once at the end
    ('optimize'), rather than merging them level by level as they come (each document's
    postings rewritten three times more at 100k). Persistent until turned back: the store,
    opened on an index whose build stopped midway, turns it back."""
    with contextlib.suppress(sqlite3.OperationalError):
        for key, value in _BULK_MERGING if defer else _MERGING:
            cur.execute("INSERT INTO kb_fts (kb_fts, rank) VALUES (?, ?)", (key, value))


def _merging_deferred(cur: sqlite3.Cursor) -> bool:
    try:
        row = cur.execute("SELECT v FROM kb_fts_config WHERE k = 'automerge'").fetchone()
    except sqlite3.OperationalError:  # an SQLite without the table's config
        return False
    return row is not None and row[0] == 0
