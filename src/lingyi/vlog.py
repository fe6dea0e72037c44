"""The verification log: append-only JSONL with a hash chain.

Every record carries ``prev`` (the hash of the record before it) and ``hash`` (sha256 of
the record's canonical JSON without ``hash``), so an edited, deleted or reordered record
is found by :func:`verify_chain`. Appends take a thread lock and an ``flock`` on the
file, so threads and processes never interleave or lose records. Appending reads only
the tail of the file, never the whole log: cost does not grow with the log.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lingyi._ids import new_id, utc_now
from lingyi.errors import LogError
from lingyi.redact import may_hold_secret, redact

SCHEMA_VERSION = 1
GENESIS = "0" * 64
_TAIL_BLOCK = 64 * 1024


def canonical(record: dict[str, Any]) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


@dataclass
class _Tail:
    last_hash: str
    ends_with_newline: bool


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("hash"), str) else None


def _read_tail(fd: int, size: int) -> _Tail:
    """Find the hash of the last readable record by reading backwards from the end."""
    if size == 0:
        return _Tail(GENESIS, True)
    block = _TAIL_BLOCK
    while True:
        start = max(0, size - block)
        data = os.pread(fd, size - start, start)
        lines = data.split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first piece may be the end of a longer line
        for raw in reversed(lines):
            record = _parse_line(raw) if raw.strip() else None
            if record is not None:
                return _Tail(str(record["hash"]), data.endswith(b"\n"))
        if start == 0:
            return _Tail(GENESIS, data.endswith(b"\n"))
        block *= 4


class VerificationLog:
    """Append records to one JSONL file, safely from many threads and processes."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._lock = threading.Lock()
        self._known_end = -1
        self._last_hash = GENESIS
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogError(f"cannot open the verification log {path}: {exc}") from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> VerificationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Complete ``record`` (v, id, ts, prev, hash), write it, and return it."""
        record = {"v": SCHEMA_VERSION, "id": new_id(), "ts": utc_now(), **record}
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._write_locked(record)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return record

    def _write_locked(self, record: dict[str, Any]) -> None:
        size = os.fstat(self._fd).st_size
        prefix = b""
        if size != self._known_end:  # another writer appended, or first write
            tail = _read_tail(self._fd, size)
            self._last_hash = tail.last_hash
            prefix = b"" if tail.ends_with_newline else b"\n"  # isolate a torn line
        record["prev"] = self._last_hash
        body = canonical(record)
        if may_hold_secret(body):  # the text is needed for the hash anyway: look once
            record.update(redact(record))
            body = canonical(record)
        record["hash"] = hashlib.sha256(body.encode()).hexdigest()
        line = prefix + (body[:-1] + f',"hash":"{record["hash"]}"}}\n').encode()
        os.write(self._fd, line)
        if self.fsync:
            os.fsync(self._fd)
        self._known_end = size + len(line)
        self._last_hash = record["hash"]


@dataclass
class LogLine:
    """One line of the log as read: the record, or why it could not be read."""

    lineno: int
    record: dict[str, Any] | None
    error: str | None = None


def iter_log(path: Path) -> Iterator[LogLine]:
    """Stream the log line by line (memory does not grow with the log)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            yield _read_line(lineno, raw)


def _read_line(lineno: int, raw: bytes) -> LogLine:
    torn = not raw.endswith(b"\n")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        what = (
            "torn last line (no newline: an interrupted write)"
            if torn
            else f"unreadable line (an interrupted write, or corrupted): {exc}"
        )
        return LogLine(lineno, None, what)
    if not isinstance(value, dict):
        return LogLine(lineno, None, "not a JSON object")
    return LogLine(lineno, value)


@dataclass
class ChainBreak:
    lineno: int
    record_id: str | None
    reason: str


@dataclass
class ChainReport:
    records: int = 0
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    breaks: list[ChainBreak] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def first_bad(self) -> ChainBreak | None:
        return self.breaks[0] if self.breaks else None


def verify_chain(path: Path) -> ChainReport:
    """Check every record's hash and its link to the record before it."""
    report, prev = ChainReport(), GENESIS
    for line in iter_log(path):
        if line.record is None:
            report.unreadable.append((line.lineno, line.error or "unreadable"))
            continue
        report.records += 1
        problem = _chain_problem(line.record, prev)
        if problem:
            report.breaks.append(ChainBreak(line.lineno, line.record.get("id"), problem))
        prev = str(line.record.get("hash", ""))
    return report


def _chain_problem(record: dict[str, Any], prev: str) -> str | None:
    if "hash" not in record:
        return "no hash field"
    if record_hash(record) != record["hash"]:
        return "hash does not match the content (record edited)"
    if record.get("prev") != prev:
        return "prev does not match the record before (a record was deleted or reordered)"
    return None
