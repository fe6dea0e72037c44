"""The one chain verifier of the log, for ``lingyi log verify`` and for stats.

Every record carries ``prev`` (the hash of the record before it) and ``hash``: the sha256 of
the record's canonical JSON without ``hash`` (a plain chain), or, when the record names a
``key_id``, the HMAC-SHA256 of the same bytes with that key (a keyed chain). A plain chain
finds an edited, deleted or reordered record, but whoever can write the file can recompute
it; a keyed chain cannot be recomputed without the key. The rules, which the writer follows:

* a record without a ``hash`` key is older than the chain (schema 0): it is counted as
  ``unhashed``, it is not a break, and the chain passes over it;
* a record whose hash (or MAC) does not match its content is ``edited``; the chain goes on
  from the hash it carries (so one edit is one break, not two);
* a record whose ``prev`` is not the hash of the hashed record before it is ``relinked``
  (one was deleted, inserted or reordered); the first hashed record must link to GENESIS;
* keys change only through a ``key_rotation`` record (``from`` the chain's key, ``to`` the
  key it is itself keyed with); a record keyed otherwise, or not keyed after keyed records
  (a chain rewritten without the key), is ``rekeyed``; a record keyed with a key the
  verifier was given none of, while it was given keys, is ``rekeyed`` too;
* a line that is not a JSON object (a torn last line after a crash) is ``unreadable``:
  reported, skipped, never fatal, and not a break.

A verifier given no keys checks a keyed record's link and key rules but not its MAC (it is
counted as ``keyed_unchecked``). Given keys, it also requires the last hashed record to be
keyed (:meth:`ChainVerifier.finish`), so a log rewritten as a plain chain fails.

:class:`ChainVerifier` applies them one line at a time. Stats feed it in the same pass as
their figures, through :meth:`ChainVerifier.skim` for lines they need not parse, and merge
the verifiers of log chunks read by worker processes (:meth:`ChainVerifier.merge`), so the
figures and ``log verify`` agree by construction. Checkpoints (a cut-off tail) are checked
by :mod:`lingyi.log.checkpoints`, from what :func:`verify_log` feeds them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lingyi.log.keys import KeyRing, LogKey
from lingyi.log.reader import LogLine, read_log
from lingyi.log.records import record_kind

GENESIS = "0" * 64
MAX_LISTED = 1000  # breaks and unreadable lines listed in a report; the counts stay exact
ROTATION = "key_rotation"  # the kind of record that changes the chain's key

EDITED = "hash does not match the content (record edited)"
RELINKED = "prev does not match the record before (a record was deleted or reordered)"
DOWNGRADED = (
    "not keyed, after keyed records (the chain was rewritten without the key, or the key "
    "was removed from the config)"
)
UNKEYED_TAIL = (
    "the last record is not keyed, but a key is configured (the log was rewritten without "
    "the key, or nothing was appended since the key was configured)"
)


def canonical(record: dict[str, Any]) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


def record_mac(record: dict[str, Any], key: LogKey) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return key.record_mac(canonical(body).encode())


_HASH_TAIL = b',"hash":"'  # how the writer ends every line: ,"hash":"<64 hex>"}
_TAIL_LEN = len(_HASH_TAIL) + 64 + 2


def _digest(body: memoryview | bytes, key: LogKey | None) -> bytes:
    """The hash (or MAC) of a record line's bytes before ``,"hash":…``, closed with ``}``."""
    if key is not None:
        return key.record_mac(body, b"}").encode()
    digest = hashlib.sha256(body)
    digest.update(b"}")
    return digest.hexdigest().encode()


def hash_ok(raw: bytes, record: dict[str, Any], key: LogKey | None = None) -> bool:
    """Does ``record`` (parsed from ``raw``) match its hash (its MAC with ``key``)?

    The writer hashes canonical(record without hash) and writes exactly those bytes followed
    by ``,"hash":"…"}``, so hashing the raw prefix avoids re-serialising every record. A line
    laid out otherwise (rewritten by another tool) gets the canonical check.
    """
    line = raw.rstrip(b"\r\n")
    laid_out = line[-_TAIL_LEN:-66] == _HASH_TAIL and line.endswith(b'"}')
    if laid_out:
        size = len(line) - _TAIL_LEN
        if _digest(memoryview(raw)[:size], key) == line[-66:-2]:
            return True
    expected = record_mac(record, key) if key is not None else record_hash(record)
    return expected == record.get("hash")


# The writer's canonical layout ends every record with ts, (type), v and the hash; keys are
# sorted, so these are top-level keys whenever they sit right before the hash.
_TAIL_RE = re.compile(
    rb',"ts":"([^"\\]{1,40})"(?:,"type":"[a-z_]{1,40}")?,"v":(\d{1,6}),'
    rb'"hash":"([0-9a-f]{64})"\}\r?\n?\Z'
)
_KIND = b'"kind":"'
_VERIFICATION = b'verification"'
_PREV = b'"prev":'
_KEY_ID = b'"key_id":'
_KEY_ID_LEN = 16


def tail_match(raw: bytes) -> re.Match[bytes] | None:
    """The writer's tail of ``raw``: groups ts, v and hash; looked for in the last bytes only."""
    return _TAIL_RE.search(raw, max(0, len(raw) - 240))


def key_problem(current: str | None, record: dict[str, Any]) -> str | None:
    """What is wrong with ``record``'s key, when the chain before it was keyed ``current``."""
    key_id = record.get("key_id")
    if record_kind(record) == ROTATION:
        if key_id is None or record.get("to") != key_id:
            return "a key_rotation record that is not keyed with the key it rotates to"
        if record.get("from") != current:
            return f"a key_rotation from {record.get('from')}, but the chain was keyed {current}"
        return None
    if key_id == current:
        return None
    if key_id is None:
        return DOWNGRADED
    return f"keyed with {key_id}, but the chain is keyed {current} (a key change without a key_rotation record)"


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
    ``plain`` and ``keyed`` count hashed records by how they are chained; ``keyed_unchecked``
    are the keyed ones whose MAC could not be checked (no key given).
    """

    lines: int = 0
    records: int = 0
    unhashed: int = 0
    first_unhashed: int | None = None  # line of the first record older than the chain
    edited: int = 0
    relinked: int = 0
    rekeyed: int = 0
    unreadable_count: int = 0
    plain: int = 0
    keyed: int = 0
    keyed_unchecked: int = 0
    rotations: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def break_count(self) -> int:
        return self.edited + self.relinked + self.rekeyed

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
            "rekeyed": self.rekeyed,
            "unhashed": self.unhashed,
            "first_unhashed": self.first_unhashed,
            "plain": self.plain,
            "keyed": self.keyed,
            "keyed_unchecked": self.keyed_unchecked,
            "key_rotations": self.rotations,
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


@dataclass(frozen=True)
class _FirstLink:
    """A chunk's first hashed record, checked against the chunk before when they merge."""

    lineno: int
    record_id: str | None
    prev: object
    record: dict[str, Any]


_UNKNOWN = "?"  # a chunk starting mid-log does not know the key of the chain before it
_SKIMMED_PLAIN = (0, None, False)  # ChainVerifier.last after a plain line was skimmed


class ChainVerifier:
    """Follows the chain line by line; ``report`` holds what it found so far.

    A verifier for a chunk that starts mid-log is made with ``prev=None``: its first link is
    kept and checked when the chunks are merged in order. ``keys``: the MACs of keyed
    records are checked, and a key it does not hold is a break. ``seq`` is the sequence
    number of the last hashed record (its own ``seq``, or counted when it has none).
    """

    def __init__(
        self,
        prev: str | None = GENESIS,
        keys: KeyRing | None = None,
    ) -> None:
        self.prev = prev
        self.keys = keys
        self.key_id: str | None = None if prev is not None else _UNKNOWN
        self.seq = 0
        self.report = ChainReport()
        self.first_link: _FirstLink | None = None
        self.last: tuple[int, str | None, bool] | None = None  # lineno, id, keyed

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
        return self._hashed(line, record)

    def feed_written(self, line: LogLine, tail: re.Match[bytes] | None) -> Problem | None:
        """:meth:`feed`, for a line whose :func:`tail_match` is ``tail``: the same outcome,
        quicker for a plain record of a plain chain, as the writer wrote it.

        Taken only when :meth:`feed` would find nothing wrong and do exactly this: the record
        links to the hash before it, names no key and rotates none, so :func:`key_problem`
        is None and the link holds; its ``hash`` is text, and the sha256 of the bytes before
        the tail's ``,"hash":`` closed with ``}`` is the tail's hash, which is
        :func:`hash_ok`'s own test for a line laid out as the writer does (the tail matched
        means it is). Anything else, a mismatch included, goes to :meth:`feed`, which
        reports it; nothing is changed before that.
        """
        record = line.record
        prev = self.prev
        if (
            tail is None
            or record is None
            or prev is None
            or self.key_id is not None
            or record.get("prev") != prev
            or "key_id" in record
            or record.get("kind") == ROTATION
            or not isinstance(stored := record.get("hash"), str)
        ):
            return self.feed(line)
        if _digest(memoryview(line.raw)[: tail.start(3) - len(_HASH_TAIL)], None) != tail[3]:
            return self.feed(line)
        report = self.report
        report.lines += 1
        report.records += 1
        report.plain += 1
        self.prev = stored  # _advance, for a record that names no key and rotates none
        seq = record.get("seq")
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else self.seq + 1
        self.last = (line.lineno, _id_of(record), False)
        return None

    def _hashed(self, line: LogLine, record: dict[str, Any]) -> Problem | None:
        stored, record_id = record["hash"], _id_of(record)
        problem = self._content(line, record, record_id)
        if self.key_id == _UNKNOWN or self.prev is None:
            if self.first_link is None:
                self.first_link = _FirstLink(line.lineno, record_id, record.get("prev"), record)
        elif (why := key_problem(self.key_id, record)) is not None:
            problem = problem or self._counted_break("rekeyed", line.lineno, record_id, why)
        elif record.get("prev") != self.prev:
            problem = problem or self.relinked(line.lineno, record_id)
        self._advance(record, stored)
        self.last = (line.lineno, record_id, "key_id" in record)
        return problem

    def _content(
        self, line: LogLine, record: dict[str, Any], record_id: str | None
    ) -> Problem | None:
        """Is the hash (or MAC) right? Counts the record as plain, keyed or keyed unchecked."""
        report, stored, key_id = self.report, record["hash"], record.get("key_id")
        if key_id is None:
            report.plain += 1
            ok = isinstance(stored, str) and hash_ok(line.raw, record, None)
        elif self.keys is None:
            report.keyed_unchecked += 1
            return None  # the link and the key rules are still checked
        elif (key := self.keys.get(key_id)) is None:
            why = f"keyed with {key_id}, a key not in {self.keys.source}"
            return self._counted_break("rekeyed", line.lineno, record_id, why)
        else:
            report.keyed += 1
            ok = isinstance(stored, str) and hash_ok(line.raw, record, key)
        return None if ok else self._counted_break("edited", line.lineno, record_id, EDITED)

    def _advance(self, record: dict[str, Any], stored: object) -> None:
        if isinstance(stored, str):
            self.prev = stored
        if record_kind(record) == ROTATION:
            self.report.rotations += 1
        key_id = record.get("key_id")
        self.key_id = key_id if isinstance(key_id, str) else None
        seq = record.get("seq")
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else self.seq + 1

    def finish(self) -> Problem | None:
        """At the end of the log: with keys, the last hashed record must be keyed."""
        if self.keys is None or self.last is None or self.last[2]:
            return None
        return self._counted_break("rekeyed", self.last[0], self.last[1], UNKEYED_TAIL)

    def skim(self, raw: bytes, tail: re.Match[bytes]) -> bool:
        """Verify a line without parsing it, if it is a verification as the writer wrote it.

        True: the hash matched, the line links to the record before, it is a verification
        and keyed as the chain is; the line is counted and the chain moved on. False:
        anything unusual (another layout, a mismatch, another kind, a duplicated ``prev``,
        ``kind`` or ``key_id`` key, a key it does not hold); nothing was counted and the
        caller must :meth:`feed` the parsed line. ``seq`` is not followed here (checkpoints
        are checked by a full pass).

        The link is looked for as the line's only ``"prev":`` key. A line crafted with that
        key nested instead of at the top, and a recomputed hash, passes here and not in
        :meth:`feed`; its hash still commits to the previous hash, so the order it proves is
        the same.
        """
        link = self._link()
        if link is None:
            return False
        # The three scans and the hash, inline: this runs for nearly every line of a big log.
        at = raw.find(_PREV)
        if at < 0 or raw.find(_PREV, at + 7) >= 0:
            return False
        if not raw.startswith(b'"%s"' % link, at + 7):
            return False
        kind = raw.find(_KIND)
        if kind >= 0 and not (
            raw.startswith(_VERIFICATION, kind + 8) and raw.find(_KIND, kind + 8) < 0
        ):
            return False
        key_at = raw.find(_KEY_ID)
        if key_at >= 0:
            return self._skim_keyed(raw, tail, key_at)
        if self.key_id is not None:
            return False
        digest = hashlib.sha256(memoryview(raw)[: tail.start(3) - len(_HASH_TAIL)])
        digest.update(b"}")
        stored = digest.hexdigest()
        if stored.encode() != tail[3]:
            return False
        report = self.report  # _skimmed, inline
        report.lines += 1
        report.records += 1
        report.plain += 1
        self.prev = stored
        self.last = _SKIMMED_PLAIN
        return True

    def _link(self) -> bytes | None:
        """The hash the next line must link to, as bytes; None: not known (a chunk before
        its first record), or a "hash" of lone surrogates that no line's bytes can hold
        (a forged line: feed reports the next line, where encoding it would crash)."""
        try:
            return None if self.prev is None else self.prev.encode()
        except UnicodeEncodeError:
            return None

    def plain_prev(self) -> bytes | None:
        """The hash the next line must link to, as bytes, when :meth:`skim`'s plain path
        applies to it (the chain is plain and its last hash known); None otherwise. For a
        caller that runs that path inline over many lines (:mod:`lingyi.stats.scanloop`)."""
        return None if self.key_id is not None else self._link()

    def skimmed_plain(self, count: int, prev: bytes) -> None:
        """Credit ``count`` plain lines verified as :meth:`skim` does, inline by a caller;
        ``prev`` is the hash of the last of them."""
        report = self.report
        report.lines += count
        report.records += count
        report.plain += count
        self.prev = prev.decode()
        self.last = _SKIMMED_PLAIN

    def _skim_keyed(self, raw: bytes, tail: re.Match[bytes], key_at: int) -> bool:
        usable, key = self._skim_key(raw, key_at)
        if (
            not usable
            or _digest(memoryview(raw)[: tail.start(3) - len(_HASH_TAIL)], key) != tail[3]
        ):
            return False
        self._skimmed(tail[3].decode(), True)
        return True

    def _skim_key(self, raw: bytes, at: int) -> tuple[bool, LogKey | None]:
        """(usable, key): the line (whose first ``"key_id":`` is at ``at``) must be keyed as
        the chain is, with a key this verifier holds. Without the MAC, a ``"key_id"`` nested in
        a plain line could pass for the record's own, so keyed lines without a key go to
        :meth:`feed`."""
        if at < 0:
            return self.key_id is None, None
        start = at + len(_KEY_ID) + 1
        key_id = raw[start : start + _KEY_ID_LEN].decode("ascii", "replace")
        key = self.keys.get(key_id) if self.keys is not None else None
        usable = (
            key is not None
            and key_id == self.key_id
            and raw[start + _KEY_ID_LEN : start + _KEY_ID_LEN + 1] == b'"'
            and raw.find(_KEY_ID, at + 1) < 0
        )
        return usable, key

    def _skimmed(self, stored: str, keyed: bool) -> None:
        report = self.report
        report.lines += 1
        report.records += 1
        if keyed:
            report.keyed += 1
        else:
            report.plain += 1
        self.prev = stored
        self.last = (0, None, keyed)

    def merge(self, other: ChainVerifier, line_offset: int) -> list[Problem]:
        """Append the verifier of the chunk that follows this one; returns new problems."""
        found: list[Problem] = []
        link = other.first_link
        if link is not None:
            at = link.lineno + line_offset
            if (why := key_problem(self.key_id, link.record)) is not None:
                found.append(self._counted_break("rekeyed", at, link.record_id, why))
            elif link.prev != self.prev:
                found.append(self.relinked(at, link.record_id))
        if other.prev is not None:
            self.prev = other.prev
        if other.key_id != _UNKNOWN:
            self.key_id = other.key_id
        self.last = other.last or self.last
        self._add_counts(other.report, line_offset)
        return found

    _COUNTS = (
        "lines", "records", "unhashed", "edited", "relinked", "rekeyed", "unreadable_count",
        "plain", "keyed", "keyed_unchecked", "rotations",
    )  # fmt: skip

    def _add_counts(self, other: ChainReport, line_offset: int) -> None:
        mine = self.report
        for name in self._COUNTS:
            setattr(mine, name, getattr(mine, name) + getattr(other, name))
        if mine.first_unhashed is None and other.first_unhashed is not None:
            mine.first_unhashed = other.first_unhashed + line_offset
        moved = [ChainBreak(b.lineno + line_offset, b.record_id, b.reason) for b in other.breaks]
        mine.breaks = sorted(mine.breaks + moved, key=lambda b: b.lineno)[:MAX_LISTED]
        unreadable = [(n + line_offset, e) for n, e in other.unreadable]
        mine.unreadable = (mine.unreadable + unreadable)[:MAX_LISTED]

    def relinked(self, lineno: int, record_id: str | None) -> Problem:
        return self._counted_break("relinked", lineno, record_id, RELINKED)

    def _counted_break(self, kind: str, lineno: int, record_id: str | None, reason: str) -> Problem:
        setattr(self.report, kind, getattr(self.report, kind) + 1)
        return self._break(lineno, record_id, reason)

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


def verify_chain(path: Path, keys: KeyRing | None = None) -> ChainReport:
    """Check every record's hash (or MAC, with ``keys``) and its link to the record before
    it (exact: every line is parsed). A missing log is an empty, intact chain."""
    chain = ChainVerifier(keys=keys)
    for line in read_log(path):
        chain.feed(line)
    chain.finish()
    return chain.report
