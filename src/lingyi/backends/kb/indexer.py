"""Keeping the index equal to the folder, one file at a time.

A file that appeared, changed or disappeared is re-indexed alone: its row in ``files`` is
replaced and its document, if it is the one in effect for its id, is removed from and added
to the FTS table. Each batch is one transaction, so searches (on their own connections) see
either the old or the new state of a file, never half of it. Applying the same change twice
(two processes sharing one index) leaves the same state.

Two files with the same id: the first path in sorted order wins; when it goes, the next one
is read again and takes its place.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from lingyi._logging import get_logger
from lingyi.backends.kb.documents import KBProblem, Parsed, load_file
from lingyi.backends.kb.store import Store, defer_merging, domain_token
from lingyi.backends.kb.terms import index_text
from lingyi.errors import BackendError

log = get_logger()

Signature = tuple[int, int]  # (mtime_ns, size)
BATCH = 500  # files per transaction: short enough that a writer never holds the file long
# Files per transaction of a first build: FTS5 writes a segment at each commit (and merges
# them later), so fewer, larger commits cost less. 2,000 cost as little as 5,000 (measured),
# hold less in memory (+12 MB resident rather than +37, at 20k), and keep a transaction
# short enough that a second process opening the same index waits less than its timeout.
BULK = 2000
PARALLEL_FROM = 2000  # changed files from which worker processes read them (a start costs)
CHUNK = 250  # files per worker task


class Prepared(NamedTuple):
    """A parsed document with its FTS columns, ready to insert (a tuple: it crosses from
    the worker processes pickled, and a tuple pickles smaller and faster than a class)."""

    doc_id: str
    path: str
    title: str
    domain: str
    tags: str  # one per line
    body: str
    id_line: int
    columns: tuple[str, str, str, str]  # dom, title, tags, body as index tokens
    ntok: int  # tokens of title, tags and body: the document's length for bm25


Loaded = Prepared | KBProblem | None  # None: the file is gone
Reread = tuple[Signature | None, Loaded]
Item = tuple[str, Signature | None, Loaded]  # a file, its signature, what it holds


def load(root: Path, rel: str, domains: Sequence[str] | None) -> Prepared | KBProblem:
    """A file as it will be indexed, or why it cannot be."""
    loaded = load_file(root, rel, domains)
    return prepare(loaded) if isinstance(loaded, Parsed) else loaded


def prepare(parsed: Parsed) -> Prepared:
    doc = parsed.doc
    (title, n1), (tags, n2), (body, n3) = map(index_text, (doc.title, " ".join(doc.tags), doc.body))
    columns = (domain_token(doc.domain), title, tags, body)
    return Prepared(
        doc.id,
        doc.path,
        doc.title,
        doc.domain,
        "\n".join(doc.tags),
        doc.body,
        parsed.id_line,
        columns,
        n1 + n2 + n3,
    )


class Indexer:
    """Brings the index up to date with the folder; one caller at a time."""

    def __init__(self, root: Path, store: Store, domains: Sequence[str] | None) -> None:
        self._root, self._store, self._domains = root, store, domains
        self._lock = threading.Lock()
        self.stopping = threading.Event()  # set on close: a long re-index stops between batches

    # -- what changed ---------------------------------------------------------------------

    def reconcile(self, under: str = "") -> int:
        """Compare the folder (or the subfolder ``under``) with the index; re-index what
        differs. Returns how many files did."""
        with self._lock:
            on_disk = scan(self._root, under)
            with self._store.reading() as conn:
                known = dict(_known_files(conn, under))
            changed = [rel for rel, sig in on_disk.items() if known.get(rel) != sig]
            changed += [rel for rel in known if rel not in on_disk]
            self._apply(sorted(changed), on_disk, fresh=not known and not under)
            return len(changed)

    def update(self, rels: Iterable[str]) -> int:
        """Re-read these files whatever their signature (a watcher saw them change)."""
        with self._lock:
            wanted = sorted(set(rels))
            sigs = {rel: sig for rel in wanted if (sig := self._visible(rel)) is not None}
            self._apply(wanted, sigs)
            return len(wanted)

    def knows_folder(self, rel: str) -> bool:
        """Whether the index has files below ``rel`` (a folder that may have just gone)."""
        with self._store.reading() as conn:
            pattern = _like_prefix(rel + "/")
            row = conn.execute(
                "SELECT 1 FROM files WHERE path LIKE ? ESCAPE '\\' LIMIT 1", (pattern,)
            ).fetchone()
        return row is not None

    def _visible(self, rel: str) -> Signature | None:
        """The signature of ``rel`` if a scan would list it, else None."""
        path = self._root / rel
        if not visible_file(path) or any(p.startswith(".") for p in rel.split("/")):
            return None
        parents = path.relative_to(self._root).parents
        if any((self._root / p).is_symlink() for p in parents if p != Path(".")):
            return None  # below a link to a folder, which the scan does not follow
        return _signature(path)

    # -- applying ---------------------------------------------------------------------------

    def _apply(self, rels: list[str], sigs: dict[str, Signature], fresh: bool = False) -> None:
        """Index ``rels`` (sorted) in batches. ``fresh``: the index had no file when the
        changes were listed, so every file is new (checked again in each transaction)."""
        if not rels:
            return
        batch: list[Item] = []
        size = BULK if fresh else BATCH
        for item in self._loads(rels, sigs):
            batch.append(item)
            if len(batch) >= size:
                if self.stopping.is_set():
                    return
                self._write(batch, fresh)
                batch = []
        self._write(batch, fresh)
        if fresh and not self.stopping.is_set():
            self._optimize()
        log.info("kb.indexed", folder=str(self._root), changed=len(rels))

    def _optimize(self) -> None:
        """Merge a first build's FTS segments into one, then merge as usual again: left as
        they were, a later one-file commit could set off a merge of large segments
        (measured: up to 270 ms once in 300 updates, against 20 ms after this)."""
        try:
            with self._store.writing() as cur:
                defer_merging(cur, False)
                cur.execute("INSERT INTO kb_fts (kb_fts) VALUES ('optimize')")
        except sqlite3.Error as exc:
            raise BackendError(f"cannot index knowledge base {self._root}: {exc}") from exc

    def _loads(self, rels: list[str], sigs: dict[str, Signature]) -> Iterator[Item]:
        present = [(rel, sigs.get(rel)) for rel in rels]
        if len(rels) >= PARALLEL_FROM and _workers() > 0:
            return self._in_processes(present)
        return ((rel, sig, self._load_if(rel, sig)) for rel, sig in present)

    def _in_processes(self, present: list[tuple[str, Signature | None]]) -> Iterator[Item]:
        """Read, parse and segment in worker processes (that work holds the GIL; SQLite's
        inserts, here, are the rest), in path order. Without workers, read here."""
        done = 0
        try:
            for item in _prepared_by_workers(self._root, present, self._domains):
                yield item
                done += 1
        except (OSError, pickle.PickleError) as exc:  # no worker could start, or one died
            log.warning("kb.workers_failed", folder=str(self._root), error=str(exc))
            yield from ((rel, sig, self._load_if(rel, sig)) for rel, sig in present[done:])

    def _load_if(self, rel: str, sig: Signature | None) -> Loaded:
        return None if sig is None else load(self._root, rel, self._domains)

    def _reread(self, rel: str) -> Reread:
        sig = self._visible(rel)
        return sig, self._load_if(rel, sig)

    def _write(self, batch: list[Item], fresh: bool) -> None:
        if not batch or self.stopping.is_set():
            return
        try:
            with self._store.writing() as cur:
                writer = _Writer(cur, self._reread)
                # Another process may have indexed some of these files meanwhile.
                if fresh and _none_known(cur, batch):
                    defer_merging(cur, True)
                    writer.add_all(batch)
                else:
                    for rel, sig, loaded in batch:
                        writer.apply(rel, sig, loaded)
                writer.count()
        except sqlite3.Error as exc:
            raise BackendError(f"cannot index knowledge base {self._root}: {exc}") from exc


class _Writer:
    """The changes of one transaction."""

    def __init__(self, cur: sqlite3.Cursor, reread: Callable[[str], Reread]) -> None:
        self._cur, self._reread = cur, reread
        self._docs = self._tokens = 0  # deltas of meta's counters

    def apply(self, rel: str, sig: Signature | None, loaded: Loaded) -> None:
        cur = self._cur
        old = cur.execute("SELECT doc_id FROM files WHERE path = ?", (rel,)).fetchone()
        affected = [old[0]] if old and old[0] else []
        if affected:
            self._drop(affected[0], rel)
        if loaded is None or sig is None:
            cur.execute("DELETE FROM files WHERE path = ?", (rel,))
        else:
            cur.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                (rel, *sig, *_file_state(loaded)),
            )
            if isinstance(loaded, Prepared):
                affected.append(loaded.doc_id)
            else:
                _report(loaded)
        for doc_id in dict.fromkeys(affected):
            self._elect(doc_id, rel, loaded)

    def add_all(self, batch: list[Item]) -> None:
        """``apply`` for files the index does not know, in path order, with one statement
        per table for all of them: the first file with an id keeps it (the docs table's
        unique id ignores the others, reported as duplicates)."""
        cur, present = (
            self._cur,
            [(r, s, x) for r, s, x in batch if s is not None and x is not None],
        )
        cur.executemany(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(rel, *sig, *_file_state(loaded)) for rel, sig, loaded in present],
        )
        docs = [loaded for _, _, loaded in present if isinstance(loaded, Prepared)]
        (last,) = cur.execute("SELECT coalesce(max(rowid), 0) FROM docs").fetchone()
        cur.executemany(
            "INSERT OR IGNORE INTO docs (doc_id, path, title, domain, tags, body, ntok)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(d.doc_id, d.path, d.title, d.domain, d.tags, d.body, d.ntok) for d in docs],
        )
        added = dict(cur.execute("SELECT path, rowid FROM docs WHERE rowid > ?", (last,)))
        new = [d for d in docs if d.path in added]
        cur.executemany(
            "INSERT INTO kb_fts (rowid, dom, title, tags, body) VALUES (?, ?, ?, ?, ?)",
            [(added[d.path], *d.columns) for d in new],
        )
        self._docs += len(new)
        self._tokens += sum(d.ntok for d in new)
        for rel, _, loaded in present:
            if isinstance(loaded, KBProblem):
                _report(loaded)
            elif rel not in added:
                first = cur.execute("SELECT path FROM docs WHERE doc_id = ?", (loaded.doc_id,))
                _report_duplicate(rel, loaded.doc_id, first.fetchone()[0], cur)

    def _drop(self, doc_id: str, rel: str) -> None:
        """Remove ``doc_id``'s document if it is the one ``rel`` put in effect."""
        row = self._cur.execute("SELECT rowid, path FROM docs WHERE doc_id = ?", (doc_id,))
        found = row.fetchone()
        if found and found[1] == rel:
            self._remove(found[0])

    def _elect(self, doc_id: str, rel: str, loaded: Loaded) -> None:
        """Put in effect the first file (by path) that declares ``doc_id``."""
        cur = self._cur
        winner = cur.execute("SELECT min(path) FROM files WHERE doc_id = ?", (doc_id,))
        first = winner.fetchone()[0]
        current = cur.execute("SELECT rowid, path FROM docs WHERE doc_id = ?", (doc_id,))
        row = current.fetchone()
        if row and row[1] == first:
            if first != rel and isinstance(loaded, Prepared) and loaded.doc_id == doc_id:
                _report_duplicate(rel, doc_id, first, cur)
            return
        if row:
            self._remove(row[0])
        if first is None:
            return
        if first == rel and isinstance(loaded, Prepared):
            self._insert(loaded)
        else:
            self._promote(first, doc_id)

    def _promote(self, rel: str, doc_id: str) -> None:
        """``rel`` was a duplicate and now comes first: read it again and index it."""
        sig, loaded = self._reread(rel)
        if sig is not None and isinstance(loaded, Prepared) and loaded.doc_id == doc_id:
            self._cur.execute(
                "UPDATE files SET mtime_ns = ?, size = ?, id_line = ? WHERE path = ?",
                (*sig, loaded.id_line, rel),
            )
            self._insert(loaded)
        else:  # it changed since it was read: index what it is now
            self.apply(rel, sig, loaded)

    def _insert(self, item: Prepared) -> bool:
        """Index the document; False when its id is already in effect (nothing changes)."""
        cur = self._cur
        cur.execute(
            "INSERT OR IGNORE INTO docs (doc_id, path, title, domain, tags, body, ntok)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (item.doc_id, item.path, item.title, item.domain, item.tags, item.body, item.ntok),
        )
        if cur.rowcount != 1:
            return False
        cur.execute(
            "INSERT INTO kb_fts (rowid, dom, title, tags, body) VALUES (?, ?, ?, ?, ?)",
            (cur.lastrowid, *item.columns),
        )
        self._docs, self._tokens = self._docs + 1, self._tokens + item.ntok
        return True

    def _remove(self, rowid: int) -> None:
        cur = self._cur
        title, domain, tags, body = cur.execute(
            "SELECT title, domain, tags, body FROM docs WHERE rowid = ?", (rowid,)
        ).fetchone()
        # A contentless table forgets a row only when given the tokens it was indexed with.
        columns = [index_text(text) for text in (title, tags.replace("\n", " "), body)]
        cur.execute(
            "INSERT INTO kb_fts (kb_fts, rowid, dom, title, tags, body)"
            " VALUES ('delete', ?, ?, ?, ?, ?)",
            (rowid, domain_token(domain), *(tokens for tokens, _ in columns)),
        )
        cur.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
        self._docs -= 1
        self._tokens -= sum(n for _, n in columns)

    def count(self) -> None:
        self._cur.execute("UPDATE meta SET value = value + ? WHERE key = 'docs'", (self._docs,))
        self._cur.execute("UPDATE meta SET value = value + ? WHERE key = 'tokens'", (self._tokens,))


def _file_state(
    loaded: Prepared | KBProblem,
) -> tuple[str | None, int | None, int | None, str | None]:
    if isinstance(loaded, Prepared):
        return loaded.doc_id, loaded.id_line, None, None
    return None, None, loaded.line, loaded.message


def _none_known(cur: sqlite3.Cursor, batch: list[Item]) -> bool:
    """Whether no file of ``batch`` is in the index (the batch is in path order)."""
    row = cur.execute(
        "SELECT 1 FROM files WHERE path BETWEEN ? AND ? LIMIT 1", (batch[0][0], batch[-1][0])
    ).fetchone()
    return row is None


def _report(problem: KBProblem) -> None:
    log.warning("kb.problem", file=problem.file, line=problem.line, message=problem.message)


def _report_duplicate(rel: str, doc_id: str, first: str, cur: sqlite3.Cursor) -> None:
    line = cur.execute("SELECT id_line FROM files WHERE path = ?", (rel,)).fetchone()
    message = duplicate_message(doc_id, first)
    log.warning("kb.problem", file=rel, line=line[0] if line else 0, message=message)


def duplicate_message(doc_id: str, first: str) -> str:
    return f"duplicate id {doc_id!r}, already used by {first}"


# --------------------------------------------------------------------------- the folder


def scan(root: Path, under: str = "") -> dict[str, Signature]:
    """Every visible ``*.md`` file under ``root/under`` with its (mtime_ns, size).

    Links to folders are not followed (as ``os.walk`` would not); links to files are listed.
    """
    found: dict[str, Signature] = {}
    pending = [under]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(root, folder)))
        except OSError:  # gone, or not a folder
            continue
        prefix = folder + "/" if folder else ""
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(prefix + entry.name)
            elif _visible_name(entry.name) and (sig := _entry_signature(entry)) is not None:
                found[prefix + entry.name] = sig
    return found


def _entry_signature(entry: os.DirEntry[str]) -> Signature | None:
    """(mtime_ns, size) of the file (or of the link itself when its target is missing)."""
    for follow in (True, False):
        try:
            st = entry.stat(follow_symlinks=follow)
        except OSError:
            continue
        return (st.st_mtime_ns, st.st_size)
    return None


def visible_file(path: Path) -> bool:
    return _visible_name(path.name)


def _visible_name(name: str) -> bool:
    return name.lower().endswith(".md") and not name.startswith(".")


def _signature(path: Path) -> Signature | None:
    """(mtime_ns, size) of the file, or of the link itself when its target is missing."""
    for stat in (os.stat, os.lstat):
        try:
            st = stat(path)
        except OSError:
            continue
        return (st.st_mtime_ns, st.st_size)
    return None  # vanished between listing and stat


def _known_files(conn: sqlite3.Connection, under: str) -> Iterator[tuple[str, Signature]]:
    if under:
        rows = conn.execute(
            "SELECT path, mtime_ns, size FROM files WHERE path LIKE ? ESCAPE '\\'",
            (_like_prefix(under + "/"),),
        )
    else:
        rows = conn.execute("SELECT path, mtime_ns, size FROM files")
    for path, mtime_ns, size in rows:
        yield path, (mtime_ns, size)


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# --------------------------------------------------------------------------- worker processes
#
# Plain ``python -c`` children that speak pickle over their standard streams, rather than
# multiprocessing: its spawned children import the parent's main script again (a user's
# unguarded script would run twice), and a fork would copy a server's threads' locks mid-use.

_WORKER = (
    "import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); "
    "from lingyi.backends.kb.indexer import serve_worker; serve_worker()"
)
AHEAD = 3  # chunks in flight per worker: their paths fit in a pipe's buffer, so no deadlock


def _workers() -> int:
    """Worker processes for a large re-index: the cores but one (this process writes)."""
    return min(4, (os.cpu_count() or 1) - 1)


def _prepared_by_workers(
    root: Path, present: list[tuple[str, Signature | None]], domains: Sequence[str] | None
) -> Iterator[Item]:
    """``present`` loaded by worker processes, in order, a bounded number of chunks ahead."""
    chunks = [present[i : i + CHUNK] for i in range(0, len(present), CHUNK)]
    workers = [_Worker(root, domains) for _ in range(min(_workers(), len(chunks)))]
    try:
        for n, chunk in enumerate(chunks[: AHEAD * len(workers)]):
            workers[n % len(workers)].send(chunk)
        for n, chunk in enumerate(chunks):
            loaded = workers[n % len(workers)].receive()
            if n + AHEAD * len(workers) < len(chunks):
                workers[n % len(workers)].send(chunks[n + AHEAD * len(workers)])
            yield from ((rel, sig, item) for (rel, sig), item in zip(chunk, loaded, strict=True))
    finally:
        for worker in workers:
            worker.close()


class _Worker:
    def __init__(self, root: Path, domains: Sequence[str] | None) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in, self._out = self._proc.stdin, self._proc.stdout
        for message in (list(sys.path), (root, None if domains is None else list(domains))):
            pickle.dump(message, self._in)
        self._in.flush()

    def send(self, chunk: list[tuple[str, Signature | None]]) -> None:
        pickle.dump([rel if sig is not None else None for rel, sig in chunk], self._in)
        self._in.flush()

    def receive(self) -> list[Loaded]:
        try:
            loaded: list[Loaded] = pickle.load(self._out)
        except EOFError as exc:
            raise BrokenPipeError(f"knowledge-base worker exited ({self._proc.poll()})") from exc
        return loaded

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._out.close()


def serve_worker() -> None:
    """The worker's side: load each chunk of paths it is sent, until its input closes."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    root, domains = pickle.load(source)
    while True:
        try:
            rels: list[str | None] = pickle.load(source)
        except EOFError:
            return
        pickle.dump([None if rel is None else load(root, rel, domains) for rel in rels], sink)
        sink.flush()
