"""The one chain verifier of the log, for ``lingyi log verify``, the index and every reader.

Every record carries ``prev`` (the hash of the record before it) and ``hash``: the sha256 of
the record's canonical JSON without ``hash`` (a plain chain), or, when the record names a
``key_id``, the HMAC-SHA256 of the same bytes with that key (a keyed chain). A plain chain
finds an edited, deleted or reordered record, but whoever can write the file can recompute
it; a keyed chain cannot be recomputed without the key. The rules, which the writer follows:

* a record without a ``hash`` key before the first hashed record is older than the chain
  (schema 0): it is counted as ``unhashed`` and is not a break; after the first hashed
  record it is ``stripped`` (a copy with its hash, prev, seq or key_id removed), a break;
* a record whose hash (or MAC) does not match its content is ``edited``; the chain goes on
  from the hash it carries (so one edit is one break, not two);
* a record whose ``prev`` is not the hash of the hashed record before it is ``relinked``
  (one was deleted, inserted or reordered); the first hashed record must link to GENESIS;
* keys change only through a ``key_rotation`` record (``from`` the chain's key, ``to`` the
  key it is itself keyed with, a key later in the ring than ``from``: never back to a
  retired key); a record keyed otherwise, or not keyed after keyed records (a chain
  rewritten without the key), is ``rekeyed``; a record keyed with a key the verifier was
  given none of, while it was given keys, is ``rekeyed`` too;
* a line that is not a JSON object (a torn last line after a crash) is ``unreadable``:
  reported, skipped, never fatal, and not a break.

A verifier given no keys checks a keyed record's link and key rules but not its MAC (it is
counted as ``keyed_unchecked``). Given keys, it also requires the last hashed record to be
keyed (:meth:`ChainVerifier.finish`), so a log rewritten as a plain chain fails.

:class:`ChainVerifier` applies them one line at a time and says of each record whether a
reader may use it (:attr:`ChainVerifier.trusted`): only records whose own hash or MAC
verified and whose key is the chain's. ``lingyi log verify`` and the index beside the log
(:mod:`lingyi.store`) feed it the same lines, so they agree by construction. Checkpoints
(a cut-off tail) are checked by :mod:`lingyi.log.checkpoints`, from what
:func:`~lingyi.log.audit.verify_log` feeds them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lingyi.log.keys import KeyRing, LogKey
from lingyi.log.reader import LogLine, read_log
from lingyi.log.records import record_kind

GENESIS = "0" * 64
MAX_LISTED = 1000  # breaks and unreadable lines listed in a report; the counts stay exact
ROTATION = "key_rotation"  # the kind of record that changes the chain's key

EDITED = "hash does not match the content (record edited)"
RELINKED = "prev does not match the record before (a record was deleted or reordered)"
STRIPPED = (
    "no hash, after hashed records (a copy with its hash, prev, seq or key_id removed: "
    "not part of the chain)"
)
DOWNGRADED = (
    "not keyed, after keyed records (the chain was rewritten without the key, or the key "
    "was removed from the config)"
)
UNKEYED_TAIL = (
    "the last record is not keyed, but a key is configured (the log was rewritten without "
    "the key, or nothing was appended since the key was configured)"
)


def canonical(record: dict[str, Any]) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTF-8 kept as is.

    The text is ``json.dumps``'s (sort_keys, ensure_ascii off, no spaces), which every log
    written so far holds. orjson writes the same bytes several times faster (twice, with the
    check that it did), except where :func:`_as_json` finds otherwise or orjson refuses the
    value (integers beyond 64 bits, keys that are not strings, lone surrogates, subclasses):
    those are written by json. ``tests/test_record_text.py`` pins both sides.
    """
    try:
        text = orjson.dumps(record, option=_ORJSON).decode()
    except TypeError:  # orjson.JSONEncodeError
        text = None
    if text is not None and _as_json(text, record):
        return text
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_ORJSON = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS  # a subclass: json writes it
_SMALL_FLOAT = re.compile(r"[0-9]e-[0-9]|0\.0000")


def _as_json(text: str, record: dict[str, Any]) -> bool:
    """Is orjson's ``text`` what json writes? It holds no float below 1e-4 (json writes
    ``1e-05`` and ``4.2e-07``, orjson ``0.00001`` and ``4.2e-7``; a string that looks so sends
    its record to json too), and it reads back as ``record``: not so for NaN and infinities
    (orjson writes null, json NaN), nor for what json refuses (an enum, a UUID, a dataclass)."""
    if ("e-" in text or "0.0000" in text) and _SMALL_FLOAT.search(text):
        return False
    return bool(orjson.loads(text) == record)


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


def key_problem(
    current: str | None, record: dict[str, Any], keys: KeyRing | None = None
) -> str | None:
    """What is wrong with ``record``'s key, when the chain before it was keyed ``current``
    (``keys``: the ring, whose order says which rotations go forward)."""
    key_id = record.get("key_id")
    if record_kind(record) == ROTATION:
        if key_id is None or record.get("to") != key_id:
            return "a key_rotation record that is not keyed with the key it rotates to"
        if record.get("from") != current:
            return f"a key_rotation from {record.get('from')}, but the chain was keyed {current}"
        if keys is not None and not keys.after(key_id, current):
            return f"a key_rotation back to {key_id}, a key retired before {current}"
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
    stripped: int = 0
    unreadable_count: int = 0
    plain: int = 0
    keyed: int = 0
    keyed_unchecked: int = 0
    rotations: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def break_count(self) -> int:
        return self.edited + self.relinked + self.rekeyed + self.stripped

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
            "stripped": self.stripped,
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

    def state(self) -> dict[str, Any]:
        """Every count and listed line as JSON values (the index keeps it between runs)."""
        return asdict(self)

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> ChainReport:
        breaks = [ChainBreak(**b) for b in data["breaks"]]
        unreadable = [(int(n), str(e)) for n, e in data["unreadable"]]
        return cls(**{**data, "breaks": breaks, "unreadable": unreadable})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one line, as stats list it among their integrity examples."""

    lineno: int
    record_id: str | None
    text: str


class ChainVerifier:
    """Follows the chain line by line; ``report`` holds what it found so far.

    ``keys``: the MACs of keyed records are checked, and a key it does not hold is a break.
    ``seq`` is the sequence number of the last hashed record (its own ``seq``, or counted
    when it has none). ``trusted`` says of the line fed last whether its record may be used
    (its own hash or MAC verified, its key the chain's). A verifier resumes from a saved
    state (``prev``, ``key_id``, ``seq``, ``report``), as the index does.
    """

    def __init__(
        self,
        prev: str = GENESIS,
        keys: KeyRing | None = None,
        *,
        key_id: str | None = None,
        seq: int = 0,
        report: ChainReport | None = None,
    ) -> None:
        self.prev, self.keys, self.key_id, self.seq = prev, keys, key_id, seq
        self.report = report or ChainReport()
        self.trusted = False
        self.last: tuple[int, str | None, bool] | None = None  # lineno, id, keyed

    @property
    def started(self) -> bool:
        """Has a hashed record been seen (after which every record must be hashed)?"""
        return self.prev != GENESIS or self.last is not None

    def feed(self, line: LogLine) -> Problem | None:
        """Check one line exactly; returns the problem found, if any."""
        report, record = self.report, line.record
        report.lines += 1
        self.trusted = False
        if record is None:
            return self._unreadable(line.lineno, line.error or "unreadable")
        report.records += 1
        if "hash" in record:
            return self._hashed(line, record)
        if self.started:
            return self._counted_break("stripped", line.lineno, _id_of(record), STRIPPED)
        report.unhashed += 1
        if report.first_unhashed is None:
            report.first_unhashed = line.lineno
        return None

    def _hashed(self, line: LogLine, record: dict[str, Any]) -> Problem | None:
        stored, record_id = record["hash"], _id_of(record)
        problem = self._content(line, record, record_id)
        self.trusted = problem is None
        rotation = record_kind(record) == ROTATION
        if (why := key_problem(self.key_id, record, self.keys)) is not None:
            self.trusted = False
            problem = problem or self._counted_break("rekeyed", line.lineno, record_id, why)
        elif record.get("prev") != self.prev:
            problem = problem or self.relinked(line.lineno, record_id)
        # A refused rotation changes no key: what follows it must still be keyed as before.
        self._advance(record, stored, keep_key=rotation and why is not None)
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

    def _advance(self, record: dict[str, Any], stored: object, keep_key: bool) -> None:
        if isinstance(stored, str):
            self.prev = stored
        if record_kind(record) == ROTATION:
            self.report.rotations += 1
        key_id = record.get("key_id")
        if not keep_key:
            self.key_id = key_id if isinstance(key_id, str) else None
        seq = record.get("seq")
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else self.seq + 1

    def finish(self) -> Problem | None:
        """At the end of the log: with keys, the last hashed record must be keyed (the index,
        which goes on feeding its verifier, makes this check on a copy)."""
        if self.keys is None or self.last is None or self.last[2]:
            return None
        return self._counted_break("rekeyed", self.last[0], self.last[1], UNKEYED_TAIL)

    def relinked(self, lineno: int, record_id: str | None) -> Problem:
        return self._counted_break("relinked", lineno, record_id, RELINKED)

    def _counted_break(self, kind: str, lineno: int, record_id: str | None, reason: str) -> Problem:
        setattr(self.report, kind, getattr(self.report, kind) + 1)
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
