"""The embedded index: SQLite (standard library, WAL) in one file beside the log.

One transaction per :meth:`SqliteStore.ingest` (``BEGIN IMMEDIATE``: one process ingests at
a time, the others wait and then find nothing new), holding the rows of the new lines and
the state they end at, so a line is indexed exactly once even when the server and the CLI
read the log at the same time. A torn last line (no newline yet: a crash, or a write in
flight) is reported but not consumed: the next ingest reads it again once it is complete.

The state (byte offset, line count, the chain verifier's last hash, seq, key and report, the
bytes of the last line read, the file's identity) is sealed: an HMAC with the log key when
the chain is keyed, else a sha256 (which finds an accident, not a forgery). A state whose
seal fails, made with other keys, or whose log no longer holds the line it ended at (a log
rewritten, replaced or cut), is thrown away with every row, and the log ingested again.
The approval rows, which release held calls, are checked on every read: their hashes
against a digest in the sealed state, and each record against its own hash or MAC.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import hmac
import json
import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lingyi._logging import get_logger
from lingyi.errors import LogError
from lingyi.log.chain import GENESIS, ChainReport, ChainVerifier, canonical, hash_ok
from lingyi.log.checkpoints import CheckpointReport
from lingyi.log.keys import KeyRing
from lingyi.log.reader import LogLine, decode_line, loads, open_log, raw_lines
from lingyi.log.records import SCHEMA_VERSION, normalise_ts, record_kind
from lingyi.store.anchor import read_checkpoints
from lingyi.store.base import Row, Summary
from lingyi.store.counts import NOT_REJECTING, WindowCounts, next_rejection, window_counts
from lingyi.store.latency import latency_columns

log = get_logger(__name__)

INDEX_VERSION = 3  # the tables' layout; an index of another version is rebuilt
MAX_EXAMPLES = 20  # problems listed in the summary; the counts stay exact
_BATCH = 1000  # lines per executemany (memory holds one batch of rows)
_DECISIONS = ("approved", "rejected", "fallback")
_TABLES = ("records", "links", "verifications", "checks", "appeals", "approvals", "outcomes")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT, seal TEXT);
CREATE TABLE IF NOT EXISTS records (
    line INTEGER PRIMARY KEY, kind TEXT, id TEXT, ts TEXT, hash TEXT, body BLOB);
CREATE TABLE IF NOT EXISTS links (line INTEGER PRIMARY KEY, seq INTEGER, hash TEXT);
CREATE TABLE IF NOT EXISTS verifications (
    ts TEXT, line INTEGER, member TEXT, decision TEXT, type TEXT, tool TEXT, tooled INTEGER,
    ran BLOB, flagged INTEGER, ms REAL, bucket INTEGER, ns, PRIMARY KEY (ts, line)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checks (
    ts TEXT, line INTEGER, pos INTEGER, member TEXT, decision TEXT, code TEXT,
    blocking INTEGER, PRIMARY KEY (ts, line, pos)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS appeals (
    line INTEGER PRIMARY KEY, kind TEXT, id TEXT, appeal_of TEXT, appeal_id TEXT, outcome TEXT);
CREATE TABLE IF NOT EXISTS approvals (
    line INTEGER PRIMARY KEY, approval_id TEXT, event TEXT, ts TEXT, member TEXT);
CREATE TABLE IF NOT EXISTS outcomes (
    line INTEGER PRIMARY KEY, ts TEXT, member TEXT, tool TEXT, status TEXT);
"""
# A window's verifications and failed checks are read by ts (the tables are kept in ts
# order: ``lingyi.store.counts`` scans a range, with no lookup per row). A verification
# without a valid decision has the ts "" (before every window).
NO_WINDOW = ""
# Made after a build from the first line (sorting once is much cheaper than keeping them
# sorted row by row), and dropped before one.
_INDEXES = {
    "records_id": "records (id)",
    "links_seq": "links (seq)",
}


@dataclass
class _State:
    """Where the index stands in the log; everything :meth:`SqliteStore.ingest` resumes from."""

    keys: list[str] | None  # the key ids the chain was verified with (None: no keys)
    offset: int = 0
    lines: int = 0
    prev: str = GENESIS
    key_id: str | None = None
    seq: int = 0
    last: list[Any] | None = None  # the verifier's last hashed record: line, id, keyed
    report: dict[str, Any] = field(default_factory=lambda: ChainReport().state())
    anchor: list[Any] | None = None  # offset and sha256 of the last line read
    file: list[int] | None = None  # st_dev, st_ino of the log
    mtime: int | None = None  # st_mtime_ns, when the index ended at the end of the file
    invalid: int = 0
    unknown_schema: int = 0
    schema_versions: dict[str, int] = field(default_factory=dict)
    other_kinds: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    approvals: str = ""  # running sha256 of the approval rows' hashes, in log order
    # Per checkpoint file, lingyi.store.anchor's state (readers may name none, or another).
    checkpoints: dict[str, Any] = field(default_factory=dict)
    version: int = INDEX_VERSION


def _fingerprint(keys: KeyRing | None) -> list[str] | None:
    return None if keys is None else list(keys.keys)


class SqliteStore:
    """The index of one log in one SQLite file (in memory when the file cannot be written:
    the same answers, rebuilt on every open)."""

    def __init__(
        self, log_path: Path, keys: KeyRing | None, path: Path, checkpoints: Path | None = None
    ) -> None:
        self.log_path, self.keys, self.path = log_path, keys, path
        self.checkpoints = checkpoints
        # No log (yet, or a mistyped path): nothing to keep, and no folder made for it.
        self.db, self.in_memory = _connect(path) if log_path.exists() else (_memory(), True)
        self.summary = Summary(ChainReport())

    def close(self) -> None:
        self.db.close()

    # -- the seal -------------------------------------------------------------------------

    def _seal(self, body: bytes) -> str:
        if self.keys is None:
            return "sha256:" + hashlib.sha256(body).hexdigest()
        key = self.keys.current
        return f"hmac:{key.key_id}:{key.index_mac(body)}"

    def _unsealed(self, body: bytes, seal: str) -> bool:
        """Does ``seal`` fail for ``body`` (edited, or sealed with a key not in the ring)?"""
        if self.keys is None:
            return not hmac.compare_digest(seal, self._seal(body))
        scheme, _, rest = seal.partition(":")
        key_id, _, mac = rest.partition(":")
        key = self.keys.get(key_id)
        return scheme != "hmac" or key is None or not hmac.compare_digest(mac, key.index_mac(body))

    # -- resuming -------------------------------------------------------------------------

    def _resume(self) -> _State:
        """The saved state if it still describes the log; else a fresh one, tables made anew."""
        row = self.db.execute("SELECT body, seal FROM state").fetchone()
        why = "no index yet" if row is None else self._stale(row[0], row[1])
        if why is None:
            return _State(**json.loads(row[0]))
        if row is not None:
            log.info("store.rebuild", index=str(self.path), log=str(self.log_path), why=why)
        for table in (*_TABLES, "state"):  # dropped: an index of another version has
            self.db.execute(f"DROP TABLE IF EXISTS {table}")  # other columns
        for statement in _SCHEMA.split(";"):  # not executescript: it would commit
            self.db.execute(statement)
        return _State(_fingerprint(self.keys))

    def _stale(self, body: str, seal: str) -> str | None:
        if self._unsealed(body.encode(), seal):
            return "the seal does not match (the index was edited, or sealed with another key)"
        state = _State(**json.loads(body))
        if state.version != INDEX_VERSION or state.keys != _fingerprint(self.keys):
            return "made by another version or with other keys"

        if state.anchor is not None and not self._anchored(state):
            return "the log no longer holds the line the index ended at (rewritten or cut)"
        return None

    def _anchored(self, state: _State) -> bool:
        handle = open_log(self.log_path)
        if handle is None:
            return False
        with handle:
            info = os.fstat(handle.fileno())
            if state.file != [info.st_dev, info.st_ino] or info.st_size < state.offset:
                return False
            if info.st_size == state.offset and state.mtime not in (None, info.st_mtime_ns):
                return False  # no byte added, yet written to: rewritten in place
            start = int(state.anchor[0]) if state.anchor else 0
            handle.seek(start)
            data = handle.read(state.offset - start)
        return state.anchor is not None and hashlib.sha256(data).hexdigest() == state.anchor[1]

    # -- ingesting ------------------------------------------------------------------------

    def ingest(self) -> Summary:
        """Index the new lines in one transaction. An index file that cannot be written (a
        full disk, a size limit, a lock held too long) gives way to one in memory."""
        try:
            state, torn, anchor = self._transaction()
        except sqlite3.Error as exc:
            if self.in_memory:
                raise LogError(f"cannot index the log {self.log_path}: {exc}") from exc
            log.info("store.in_memory", index=str(self.path), error=str(exc))
            self.db.close()
            self.db, self.in_memory = _memory(), True
            return self.ingest()
        self.summary = _summary(state, self.keys, torn)
        self.summary.checkpoints = anchor
        return self.summary

    def _transaction(self) -> tuple[_State, tuple[int, str] | None, CheckpointReport | None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            state = self._resume()
            self._indexes(drop=state.offset == 0)
            torn = self._read_new(state)
            self._indexes(drop=False)
            anchor = self._read_checkpoints(state)
            self._save(state)
            self.db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            raise
        return state, torn, anchor

    def _read_checkpoints(self, state: _State) -> CheckpointReport | None:
        if self.checkpoints is None:
            return None
        name = str(self.checkpoints)
        saved = state.checkpoints.get(name, {})
        found = read_checkpoints(self.db, self.checkpoints, self.keys, saved, state.seq)
        state.checkpoints[name], report = found
        return report

    def rebuild(self) -> Summary:
        self.db.execute("DELETE FROM state")
        return self.ingest()

    def _indexes(self, drop: bool) -> None:
        for name, on in _INDEXES.items():
            sql = (
                f"DROP INDEX IF EXISTS {name}"
                if drop
                else f"CREATE INDEX IF NOT EXISTS {name} ON {on}"
            )
            self.db.execute(sql)

    def _read_new(self, state: _State) -> tuple[int, str] | None:
        """Index the complete lines after ``state.offset``; the torn last line, if any."""
        chain = _verifier(state, self.keys)
        batch = _Batch(state)
        for number, offset, raw in raw_lines(self.log_path, state.offset):
            lineno = state.lines + number
            if not raw.endswith(b"\n"):
                batch.flush(self.db)
                batch.finish(chain, self.log_path)
                return lineno, decode_line(0, raw).error or "torn line"
            batch.lines = lineno
            if raw.strip():
                line = decode_line(lineno, raw, offset)
                problem = chain.feed(line)
                if problem is not None:
                    batch.example(problem.lineno, problem.record_id, problem.text)
                if line.record is not None and chain.prev == line.record.get("hash"):
                    batch.rows["links"].append((lineno, chain.seq, chain.prev))
                if chain.trusted and line.record is not None:
                    batch.add(lineno, raw, line.record)
            batch.anchor = [offset, raw]
            if len(batch) >= _BATCH:
                batch.flush(self.db)
        batch.flush(self.db)
        batch.finish(chain, self.log_path)
        return None

    def _save(self, state: _State) -> None:
        body = canonical(vars(state))
        self.db.execute(
            "INSERT OR REPLACE INTO state (id, body, seal) VALUES (1, ?, ?)",
            (body, self._seal(body.encode())),
        )

    # -- queries --------------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Row]:
        for line, body in self.db.execute(sql, params):
            yield line, loads(body)

    def verifications(
        self, start: str, end: str, member: str | None = None, *, flagged: bool = False
    ) -> Iterator[Row]:
        who = "" if member is None else " AND v.member = ?"
        who += " AND v.flagged" if flagged else ""
        sql = (
            "SELECT v.line, r.body FROM verifications v JOIN records r USING (line) "
            f"WHERE v.ts >= ? AND v.ts < ?{who} ORDER BY v.line"
        )
        return self._rows(sql, (start, end) if member is None else (start, end, member))

    def counts(
        self, start: str, end: str, member: str | None, day_keys: Sequence[str]
    ) -> WindowCounts:
        return window_counts(self.db, start, end, member, day_keys)

    def rejections(
        self, start: str, end: str, member: str | None, code: str | None, first: int = 0
    ) -> Iterator[Row]:
        line: int | None = first - 1
        while line is not None:
            line = next_rejection(self.db, start, end, member, code, line)
            if line is not None:
                yield from self._rows("SELECT line, body FROM records WHERE line = ?", (line,))

    def records(
        self, kinds: Collection[str] | None = None, *, newest_first: bool = False
    ) -> Iterator[Row]:
        order = "DESC" if newest_first else "ASC"
        if kinds is None:
            return self._rows(f"SELECT line, body FROM records ORDER BY line {order}")
        marks = ",".join("?" * len(kinds))
        sql = f"SELECT line, body FROM records WHERE kind IN ({marks}) ORDER BY line {order}"
        return self._rows(sql, tuple(kinds))

    def find(self, record_id: str) -> dict[str, Any] | None:
        sql = "SELECT line, body FROM records WHERE id = ? ORDER BY line DESC LIMIT 1"
        return next((record for _, record in self._rows(sql, (record_id,))), None)

    def appeals(self, ref: str | None = None) -> Iterator[Row]:
        base = "SELECT a.line, r.body FROM appeals a JOIN records r USING (line)"
        if ref is None:
            return self._rows(base + " ORDER BY a.line")
        where = " WHERE ? IN (a.id, a.appeal_of, a.appeal_id) ORDER BY a.line"
        return self._rows(base + where, (ref,))

    def outcomes(self, start: str, end: str, member: str | None = None) -> Iterator[Row]:
        who = "" if member is None else " AND o.member = ?"
        sql = (
            "SELECT o.line, r.body FROM outcomes o JOIN records r USING (line) "
            f"WHERE o.ts >= ? AND o.ts < ?{who} ORDER BY o.line"
        )
        return self._rows(sql, (start, end) if member is None else (start, end, member))

    def approvals(self, since: str | None = None) -> Iterator[Row]:
        """Approval events, each checked again: the rows against the sealed digest (none
        added, removed or reordered), each record returned against its own hash or MAC. An
        index that fails is rebuilt from the log, once; if it fails again, the read is
        refused."""
        rows = self._approval_rows(since or "")
        if rows is None:
            log.warning("store.approvals_changed", index=str(self.path))
            self.rebuild()
            rows = self._approval_rows(since or "")
        if rows is None:
            raise LogError(f"the approvals in the log index {self.path} fail their check")
        return iter(rows)

    def _approval_rows(self, since: str) -> list[Row] | None:
        sql = "SELECT a.line, a.ts, r.hash, r.body FROM approvals a JOIN records r USING (line)"
        state = self.db.execute("SELECT body FROM state").fetchone()
        digest, rows = "", []
        for line, ts, stored, body in self.db.execute(sql + " ORDER BY a.line"):
            digest = _chained(digest, stored)
            if (ts or "") < since:
                continue  # in the digest, not returned: its MAC need not be checked
            record = loads(body)
            if record.get("hash") != stored or not self._authentic(body, record):
                return None
            rows.append((line, record))
        return rows if state is not None and digest == json.loads(state[0])["approvals"] else None

    def _authentic(self, body: bytes, record: dict[str, Any]) -> bool:
        """The record's own hash or MAC, as the chain verifier checked it when ingested."""
        key_id = record.get("key_id")
        if key_id is None:
            return hash_ok(body, record)
        if self.keys is None:
            return True  # keyed, and no key to check it with: as the verifier counted it
        key = self.keys.get(key_id)
        return key is not None and hash_ok(body, record, key)


def _chained(digest: str, record_hash: str) -> str:
    return hashlib.sha256((digest + record_hash).encode()).hexdigest()


def _connect(path: Path) -> tuple[sqlite3.Connection, bool]:
    """The index file, in WAL mode (and False); in memory when it cannot be opened (True)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA cache_size=-65536")  # 64 MiB: a build touches many pages
        _prepare(db)
        return db, False
    except (OSError, sqlite3.Error) as exc:
        log.info("store.in_memory", index=str(path), error=str(exc))
    return _memory(), True


def _memory() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    _prepare(db)
    return db


def _prepare(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)


def _verifier(state: _State, keys: KeyRing | None) -> ChainVerifier:
    report = ChainReport.from_state(state.report)
    chain = ChainVerifier(state.prev, keys, key_id=state.key_id, seq=state.seq, report=report)
    if state.last:
        lineno, record_id, keyed = state.last
        chain.last = (int(lineno), record_id, bool(keyed))
    return chain


def _summary(state: _State, keys: KeyRing | None, torn: tuple[int, str] | None) -> Summary:
    """The state as readers see it: a torn last line counted, the end-of-log check made
    (on a copy: neither is part of what the next ingest resumes from)."""
    chain = _verifier(copy.deepcopy(state), keys)
    found = [chain.feed(LogLine(torn[0], None, torn[1])) if torn else None, chain.finish()]
    examples = list(state.examples)
    for problem in found:  # a torn line is counted as unreadable, not consumed
        if problem is not None and len(examples) < MAX_EXAMPLES:
            examples.append(
                {"line": problem.lineno, "id": problem.record_id, "problem": problem.text}
            )
    return Summary(
        chain.report, state.invalid, state.unknown_schema,
        dict(state.schema_versions), dict(state.other_kinds), examples,
    )  # fmt: skip


class _Batch:
    """The rows of the lines read so far, inserted in batches; the state moved on with them."""

    def __init__(self, state: _State) -> None:
        self.state = state
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in _TABLES}
        self.anchor: list[Any] | None = None
        self.count = 0
        self.lines = state.lines  # the last complete line read

    def __len__(self) -> int:
        return self.count

    def example(self, lineno: int, record_id: object, text: str) -> None:
        if len(self.state.examples) < MAX_EXAMPLES:
            rid = record_id if isinstance(record_id, str) else None
            self.state.examples.append({"line": lineno, "id": rid, "problem": text})

    def add(self, lineno: int, raw: bytes, record: dict[str, Any]) -> None:
        """One authenticated record: its row, and the row of its kind."""
        self.count += 1
        kind, state = record_kind(record), self.state
        version = record.get("v", 0)
        state.schema_versions[str(version)] = state.schema_versions.get(str(version), 0) + 1
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
            state.unknown_schema += 1
            self.example(lineno, record.get("id"), f"unknown schema version {version!r}")
        ts = normalise_ts(record.get("ts"))
        if ts is None and kind in ("verification", "approval", "outcome"):
            state.invalid += 1
            self.example(lineno, record.get("id"), f"bad ts {record.get('ts')!r}")
        body = raw.rstrip(b"\r\n")
        self.rows["records"].append((lineno, kind, _text(record.get("id")), ts,
                                     _text(record.get("hash")), body))  # fmt: skip
        self._kind(lineno, kind, ts, record)

    def _kind(self, lineno: int, kind: str, ts: str | None, record: dict[str, Any]) -> None:
        get, rows = record.get, self.rows
        if kind == "verification":
            self._verification(lineno, ts, record)
        elif kind in ("appeal", "appeal_resolution"):
            row = (lineno, kind, _text(get("id")), _text(get("appeal_of")),
                   _text(get("appeal_id")), _text(get("outcome")))  # fmt: skip
            rows["appeals"].append(row)
        elif kind == "approval":
            rows["approvals"].append(
                (lineno, _text(get("approval_id")), _text(get("event")), ts, _text(get("member")))
            )
            self.state.approvals = _chained(self.state.approvals, str(get("hash")))
        elif kind == "outcome":
            rows["outcomes"].append(
                (lineno, ts, _text(get("member")), _text(get("tool")), _text(get("status")))
            )
        elif kind != "key_rotation":
            self.state.other_kinds[kind] = self.state.other_kinds.get(kind, 0) + 1

    def _verification(self, lineno: int, ts: str | None, record: dict[str, Any]) -> None:
        """Its row, with what the counts group by, and the rows of its failed checks."""
        get = record.get
        decision = get("decision")
        if ts is not None and decision not in _DECISIONS:
            self.state.invalid += 1
            self.example(lineno, get("id"), "no valid decision")
            ts = None
        tool, member = get("tool_call"), _text(get("member"))
        name = _text(tool.get("name")) if isinstance(tool, dict) else None
        ran = self._checks(lineno, ts, member, decision, get("checks"))
        # Read from the body by the stats, for only the records that have them.
        flagged = "judge" in record or "shadow" in record or bool(get("uncertain"))
        self.rows["verifications"].append(
            (ts or NO_WINDOW, lineno, member, _text(decision), _text(get("type")), name,
             isinstance(tool, dict), ran, flagged, *latency_columns(get("latency_ms")))
        )  # fmt: skip

    def _checks(
        self, lineno: int, ts: str | None, member: str | None, decision: object, checks: object
    ) -> bytes | None:
        """The codes of the checks that ran (a JSON array; None: no checks list), each as the
        stats name it, and a row per failed check of a verification in a window."""
        if not isinstance(checks, list):
            return None
        codes, rows = [], self.rows["checks"]
        for pos, check in enumerate(checks):
            if not isinstance(check, dict):
                continue
            code = check.get("code")
            code = code if isinstance(code, str) else str(code)
            codes.append(code)
            if ts is not None and check.get("passed") is False:
                blocking = check.get("on_fail") not in NOT_REJECTING
                rows.append((ts, lineno, pos, member, decision, code, blocking))
        return bytes(orjson.dumps(codes))

    def flush(self, db: sqlite3.Connection) -> None:
        for table, rows in self.rows.items():
            if rows:
                marks = ",".join("?" * len(rows[0]))
                db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        for rows in self.rows.values():
            rows.clear()
        self.count = 0

    def finish(self, chain: ChainVerifier, path: Path) -> None:
        """Move the state on to where the chain and the lines read end."""
        state = self.state
        state.prev, state.key_id, state.seq = chain.prev, chain.key_id, chain.seq
        state.last = list(chain.last) if chain.last else None
        state.report, state.lines = chain.report.state(), self.lines
        if self.anchor is not None:
            offset, raw = self.anchor
            state.anchor = [offset, hashlib.sha256(raw).hexdigest()]
            state.offset = offset + len(raw)
        try:
            info = path.stat()
        except OSError:
            return
        state.file = state.file or [info.st_dev, info.st_ino]
        state.mtime = info.st_mtime_ns if info.st_size == state.offset else None


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)
