"""The one hash-chain verifier of the log, for ``lingyi log verify`` and for stats.

Every record carries ``prev`` (the hash of the record before it) and ``hash`` (sha256 of
the record's canonical JSON without ``hash``), so an edited, deleted or reordered record is
found. The rules, which the writer follows too:

* a record without a ``hash`` key is older than the chain (schema 0): it is counted as
  ``unhashed``, it is not a break, and the chain passes over it;
* a record whose hash does not match its content is ``edited``; the chain goes on from the
  hash it carries (so one edit is one break, not two);
* a record whose ``prev`` is not the hash of the hashed record before it is ``relinked``
  (one was deleted, inserted or reordered); the first hashed record must link to GENESIS;
* a line that is not a JSON object (a torn last line after a crash) is ``unreadable``:
  reported, skipped, never fatal, and not a break.

:class:`ChainVerifier` applies them one line at a time. Stats feed it in the same pass as
their figures, through :meth:`ChainVerifier.skim` for lines they need not parse, and merge
the verifiers of log chunks read by worker processes (:meth:`ChainVerifier.merge`), so the
figures and ``log verify`` agree by construction.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lingyi.log.reader import LogLine, read_log

GENESIS = "0" * 64
MAX_LISTED = 1000  # breaks and unreadable lines listed in a report; the counts stay exact

EDITED = "hash does not match the content (record edited)"
RELINKED = "prev does not match the record before (a record was deleted or reordered)"


def canonical(record: dict[str, Any]) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


_HASH_TAIL = b',"hash":"'  # how the writer ends every line: ,"hash":"<64 hex>"}
_TAIL_LEN = len(_HASH_TAIL) + 64 + 2


def hash_ok(raw: bytes, record: dict[str, Any]) -> bool:
    """Does ``record`` (parsed from ``raw``) match its hash? Fast path on the writer's bytes.

    The writer hashes canonical(record without hash) and writes exactly those bytes followed
    by ``,"hash":"…"}``, so hashing the raw prefix avoids re-serialising every record. A line
    laid out otherwise (rewritten by another tool) gets the canonical check.
    """
    line = raw.rstrip(b"\r\n")
    if line[-_TAIL_LEN:-66] == _HASH_TAIL and line.endswith(b'"}'):
        body = line[:-_TAIL_LEN] + b"}"
        if hashlib.sha256(body).hexdigest().encode() == line[-66:-2]:
            return True
    return record_hash(record) == record.get("hash")


# The writer's canonical layout ends every record with ts, (type), v and the hash; keys are
# sorted, so these are top-level keys whenever they sit right before the hash.
_TAIL_RE = re.compile(
    rb',"ts":"([^"\\]{1,40})"(?:,"type":"[a-z_]{1,40}")?,"v":(\d{1,6}),'
    rb'"hash":"([0-9a-f]{64})"\}\r?\n?\Z'
)
_KIND = b'"kind":"'
_VERIFICATION = b'verification"'
_PREV = b'"prev":'


def tail_match(raw: bytes) -> re.Match[bytes] | None:
    """The writer's tail of ``raw``: groups ts, v and hash; looked for in the last bytes only."""
    return _TAIL_RE.search(raw, max(0, len(raw) - 240))


@dataclass
class ChainBreak:
    """A record that fails the chain: where, which, why."""

    lineno: int
    record_id: str | None
    reason: str


@dataclass
class ChainReport:
    """What one pass over the log found. ``ok`` means no chain break.

    ``breaks`` and ``unreadable`` list the first :data:`MAX_LISTED`; the counts are exact.
    """

    lines: int = 0
    records: int = 0
    unhashed: int = 0
    first_unhashed: int | None = None  # line of the first record older than the chain
    edited: int = 0
    relinked: int = 0
    unreadable_count: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def break_count(self) -> int:
        return self.edited + self.relinked

    @property
    def ok(self) -> bool:
        return self.break_count == 0

    @property
    def first_bad(self) -> ChainBreak | None:
        return self.breaks[0] if self.breaks else None

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "lines": self.lines,
            "records": self.records,
            "chain_breaks": self.break_count,
            "edited": self.edited,
            "relinked": self.relinked,
            "unhashed": self.unhashed,
            "first_unhashed": self.first_unhashed,
            "unreadable_count": self.unreadable_count,
            "breaks": [vars(b) for b in self.breaks],
            "unreadable": [{"line": n, "error": e} for n, e in self.unreadable],
        }


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one line, as stats list it among their integrity examples."""

    lineno: int
    record_id: str | None
    text: str


class ChainVerifier:
    """Follows the chain line by line; ``report`` holds what it found so far.

    A verifier for a chunk that starts mid-log is made with ``prev=None``: its first link is
    kept and checked when the chunks are merged in order.
    """

    def __init__(self, prev: str | None = GENESIS) -> None:
        self.prev = prev
        self.report = ChainReport()
        self.first_link: tuple[int, str | None, object] | None = None

    def feed(self, line: LogLine) -> Problem | None:
        """Check one line exactly; returns the problem found, if any."""
        report, record = self.report, line.record
        report.lines += 1
        if record is None:
            return self._unreadable(line.lineno, line.error or "unreadable")
        report.records += 1
        if "hash" not in record:
            report.unhashed += 1
            if report.first_unhashed is None:
                report.first_unhashed = line.lineno
            return None
        stored, record_id = record["hash"], _id_of(record)
        problem = None
        if not isinstance(stored, str) or not hash_ok(line.raw, record):
            report.edited += 1
            problem = self._break(line.lineno, record_id, EDITED)
        elif self.prev is None:
            self.first_link = (line.lineno, record_id, record.get("prev"))
        elif record.get("prev") != self.prev:
            problem = self.relinked(line.lineno, record_id)
        if isinstance(stored, str):
            self.prev = stored
        return problem

    def skim(self, raw: bytes, tail: re.Match[bytes]) -> bool:
        """Verify a line without parsing it, if it is a verification as the writer wrote it.

        True: the hash matched, the line links to the record before, and it is a
        verification; the line is counted and the chain moved on. False: anything unusual
        (another layout, a mismatch, another kind, a duplicated ``prev`` or ``kind`` key);
        nothing was counted and the caller must :meth:`feed` the parsed line.

        The link is looked for as the line's only ``"prev":`` key. A line crafted with that
        key nested instead of at the top, and a recomputed hash, passes here and not in
        :meth:`feed`; its hash still commits to the previous hash, so the order it proves is
        the same.
        """
        prev = self.prev
        if prev is None or raw.count(_PREV) != 1 or b'"prev":"%s"' % prev.encode() not in raw:
            return False
        kind = raw.find(_KIND)
        if kind >= 0 and not (
            raw.startswith(_VERIFICATION, kind + 8) and raw.find(_KIND, kind + 8) < 0
        ):
            return False
        digest = hashlib.sha256(memoryview(raw)[: tail.start(3) - len(_HASH_TAIL)])
        digest.update(b"}")
        if digest.hexdigest().encode() != tail[3]:
            return False
        self.report.lines += 1
        self.report.records += 1
        self.prev = tail[3].decode()
        return True

    def merge(self, other: ChainVerifier, line_offset: int) -> list[Problem]:
        """Append the verifier of the chunk that follows this one; returns new problems."""
        found: list[Problem] = []
        link = other.first_link
        if link is not None and link[2] != self.prev:
            found.append(self.relinked(link[0] + line_offset, link[1]))
        if other.prev is not None:
            self.prev = other.prev
        self._add_counts(other.report, line_offset)
        return found

    def _add_counts(self, other: ChainReport, line_offset: int) -> None:
        mine = self.report
        for name in ("lines", "records", "unhashed", "edited", "relinked", "unreadable_count"):
            setattr(mine, name, getattr(mine, name) + getattr(other, name))
        if mine.first_unhashed is None and other.first_unhashed is not None:
            mine.first_unhashed = other.first_unhashed + line_offset
        moved = [ChainBreak(b.lineno + line_offset, b.record_id, b.reason) for b in other.breaks]
        mine.breaks = sorted(mine.breaks + moved, key=lambda b: b.lineno)[:MAX_LISTED]
        unreadable = [(n + line_offset, e) for n, e in other.unreadable]
        mine.unreadable = (mine.unreadable + unreadable)[:MAX_LISTED]

    def relinked(self, lineno: int, record_id: str | None) -> Problem:
        self.report.relinked += 1
        return self._break(lineno, record_id, RELINKED)

    def _break(self, lineno: int, record_id: str | None, reason: str) -> Problem:
        if len(self.report.breaks) < MAX_LISTED:
            self.report.breaks.append(ChainBreak(lineno, record_id, reason))
        return Problem(lineno, record_id, reason)

    def _unreadable(self, lineno: int, error: str) -> Problem:
        report = self.report
        report.unreadable_count += 1
        if len(report.unreadable) < MAX_LISTED:
            report.unreadable.append((lineno, error))
        return Problem(lineno, None, error)


def _id_of(record: dict[str, Any]) -> str | None:
    value = record.get("id")
    return value if isinstance(value, str) else None


def verify_chain(path: Path) -> ChainReport:
    """Check every record's hash and its link to the record before it (exact: every line
    is parsed). A missing log is an empty, intact chain."""
    chain = ChainVerifier()
    for line in read_log(path):
        chain.feed(line)
    return chain.report
