"""Derived, queryable state beside the verification log: the index (``docs/store.md``).

The log is the record; the index is what readers query instead of streaming it. Each new
line of the log enters the index once, through the one chain verifier
(:class:`lingyi.log.chain.ChainVerifier`), and only records the verifier authenticates
become rows: verifications (with their checks), appeals, approvals, outcomes. The chain
state it resumes from is sealed with the log key, so an edited index, or a log rewritten
under it, is noticed and the index rebuilt from the log. Delete it and it is rebuilt.

:class:`Store` is the interface a second implementation fills (PostgreSQL, for replicas);
:class:`~lingyi.store.sqlite.SqliteStore` is the embedded one (sqlite3, WAL), kept at
``[store] path`` (default: ``<log>.index.sqlite`` beside the log).
"""

from __future__ import annotations

from pathlib import Path

from lingyi.log.keys import KeyRing
from lingyi.store.base import Row, Store, Summary, default_path
from lingyi.store.counts import WindowCounts
from lingyi.store.sqlite import SqliteStore


def open_store(
    log: Path,
    keys: KeyRing | None = None,
    path: Path | None = None,
    *,
    checkpoints: Path | None = None,
    rebuild: bool = False,
) -> Store:
    """The index of ``log`` (at ``path``, default beside it), brought up to date
    (``rebuild``: made again from the whole log), its ``checkpoints`` checked as it reads."""
    store = SqliteStore(log, keys, path or default_path(log), checkpoints)
    try:
        store.rebuild() if rebuild else store.ingest()
    except BaseException:
        store.close()
        raise
    return store


__all__ = ["Row", "Store", "Summary", "WindowCounts", "default_path", "open_store"]
