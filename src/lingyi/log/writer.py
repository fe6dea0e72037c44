"""The appender of the verification log: append-only JSONL with a hash chain (or a keyed one).

Appends take a thread lock and an inter-process lock (:class:`lingyi._locks.FileMutex`, a
lock file beside the log), so threads and processes never interleave or lose records, on
Linux, macOS and Windows. Appending reads only the tail of the file, never the whole log:
cost does not grow with the log. A torn last line left by a crash is isolated on its own
line (the next record starts on a fresh line) and skipped by the chain, as
:mod:`lingyi.log.chain` describes.

A record is written whole or not at all (:func:`lingyi.log.io.append_line`): a short write
continues, a failed one is taken back, and the caller gets a :class:`~lingyi.errors.LogError`
naming the log, so that the server refuses the tool and the CLI exits 2; the next append,
once there is room again, carries on the chain.

Each record is redacted (:func:`lingyi.redact.redact_record`), then cut to the size limits
(:mod:`lingyi.log.limits`), then chained: ``prev``, ``seq`` (its number in the chain), and,
with a key, ``key_id`` and a MAC as ``hash``. With checkpoints, the writer appends the
signed (seq, hash) of what it wrote to the checkpoint file before the append returns.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lingyi._ids import new_id, utc_now
from lingyi._locks import FileMutex, lock_path
from lingyi._logging import get_logger
from lingyi.errors import LogError
from lingyi.log.chain import GENESIS, ROTATION, canonical
from lingyi.log.checkpoints import CheckpointFile
from lingyi.log.io import APPEND_FLAGS, append_line, read_at, take_back
from lingyi.log.keys import KeyRing
from lingyi.log.limits import limit_record
from lingyi.log.reader import read_log
from lingyi.log.records import SCHEMA_VERSION, RecordModel
from lingyi.redact import redact_record

_TAIL_BLOCK = 64 * 1024
TORN_LIMIT = 64 * 1024 * 1024  # the longest unterminated last line looked through
log = get_logger(__name__)
# The chain link (prev, seq, key_id) is known only under the lock, after the record was
# serialised: the text holds these placeholders, replaced by the link's values. A random
# nonce per process (it never reaches the log, which holds the values): no content can spell
# one. ASCII, so that the redaction's hint pass over the same text takes its fast path
# (private-use characters, used before, sent the whole record through the per-character
# form: a third of the append); letters that are no hex digit, as no secret hint is spelled.
_NONCE_LETTERS = "ghjkmnpqrstvwxyz"
_LINK = {
    name: "".join(secrets.choice(_NONCE_LETTERS) for _ in range(24))
    for name in ("prev", "seq", "key_id")
}
_LINKED = {name: f'"{name}":' + json.dumps(p, ensure_ascii=False) for name, p in _LINK.items()}


@dataclass(frozen=True)
class LogOptions:
    """How a log is written: durability, its key, its checkpoints, its size limit."""

    fsync: bool = False
    keys: KeyRing | None = None
    checkpoints: Path | None = None
    checkpoint_every: int = 1
    max_field_bytes: int = 0  # 0: no limit
    index: Path | None = None  # the index readers of this log use (None: beside it)


@dataclass
class _Tail:
    """What the next record chains to: the last hashed record's hash, seq and key."""

    hash: str = GENESIS
    seq: int | None = 0  # None: the last record predates seq, so the records are counted
    key_id: str | None = None
    newline: bool = True  # the file ends with a newline (no torn line to isolate)


def _parse_tail(line: bytes) -> _Tail | None:
    """The chain state after ``line``, if it is a hashed record (chain rules)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or not _writable(value.get("hash")):
        return None  # not a record to link to; a forged one must not stop the writer
    seq, key_id = value.get("seq"), value.get("key_id")
    return _Tail(
        value["hash"],
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        key_id if _writable(key_id) else None,
    )


def _writable(value: object) -> bool:
    """A string the next record can carry (as its ``prev`` or a rotation's ``from``): not one
    with a lone surrogate (``"\\ud800"`` in a forged line's JSON), which UTF-8 cannot hold,
    so that linking to it would fail every append from then on."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _tail_state(fd: int, size: int) -> _Tail:
    """The chain state at the end of the file, reading backwards only as far as needed.

    A file that does not end in a newline ends in a torn line: its start is looked for in
    blocks, at most :data:`TORN_LIMIT` bytes back, never read whole. A longer unterminated
    tail (no record is that long: garbage, or a hole in a sparse file) is reported and
    skipped: the next record chains from the start, and ``lingyi log verify`` reports the
    break there if records came before it.
    """
    if size == 0:
        return _Tail()
    newline = read_at(fd, size - 1, 1) == b"\n"
    end = size if newline else _torn_start(fd, size)
    if end is None:
        log.warning("log.torn_tail_skipped", bytes_over=TORN_LIMIT, size=size)
        return _Tail(newline=False)
    found = _last_record(fd, end)
    found.newline = newline
    return found


def _torn_start(fd: int, size: int) -> int | None:
    """Where the unterminated last line starts (after the last newline; 0: the whole file),
    or None when it is longer than :data:`TORN_LIMIT`."""
    position = size
    while position > 0 and size - position < TORN_LIMIT:
        start = max(0, position - _TAIL_BLOCK)
        at = read_at(fd, start, position - start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        position = start
    return 0 if position == 0 else None


def _last_record(fd: int, end: int) -> _Tail:
    """The chain state after the last hashed record of the complete lines before ``end``."""
    block = _TAIL_BLOCK
    while end > 0:
        start = max(0, end - block)
        lines = read_at(fd, start, end - start).split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first piece may be the end of a longer line
        for raw in reversed(lines):
            if raw.strip() and (found := _parse_tail(raw)) is not None:
                return found
        if start == 0:
            break
        block *= 4
    return _Tail()


def _count_hashed(path: Path) -> int:
    """How many hashed records a log written before ``seq`` holds (once per such log)."""
    return sum(1 for line in read_log(path) if line.record is not None and "hash" in line.record)


class VerificationLog:
    """Append records to one JSONL file, safely from many threads and processes."""

    def __init__(
        self, path: Path, options: LogOptions | None = None, *, fsync: bool = False
    ) -> None:
        self.path = path
        self.options = options or LogOptions(fsync=fsync)
        self._known_end = -1
        self._tail = _Tail()
        self._fd = -1
        self._checkpoints: CheckpointFile | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, APPEND_FLAGS, 0o644)
            self._mutex = FileMutex(lock_path(path))
        except OSError as exc:
            raise LogError(f"cannot open the verification log {path}: {exc}") from exc
        try:
            if self.options.checkpoints is not None:
                every = self.options.checkpoint_every
                self._checkpoints = CheckpointFile(self.options.checkpoints, every)
            self._refuse_downgrade()
        except LogError:
            self.close()
            raise

    def _refuse_downgrade(self) -> None:
        """A keyed log is appended to with its key only: plain records after keyed ones
        would read as a rewrite (and would be one, made by whoever removed the key).

        Read without the lock (so that a server's start does not import and take it before
        its first call): records are only appended, a torn or taken-back line being written
        now is skipped as after a crash, so this sees the log as it was just before any
        append in flight, the same answer as waiting for the lock and checking first."""
        if self.options.keys is not None:
            return
        key_id = _tail_state(self._fd, os.fstat(self._fd).st_size).key_id
        if key_id is not None:
            raise LogError(
                f"the verification log {self.path} is keyed (key {key_id}), but no key is "
                "configured: set [log] key_env or key_file to its key"
            )

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._mutex.close()
        if self._checkpoints is not None:
            self._checkpoints.close()
            self._checkpoints = None

    def __enter__(self) -> VerificationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, record: RecordModel | Mapping[str, Any]) -> dict[str, Any]:
        """Complete ``record`` (v, id, ts, prev, seq, hash), write it, and return it.

        ``record`` is one of the models of :mod:`lingyi.log.records` or its JSON object.
        Raises :class:`LogError` when it cannot be written whole (nothing is then written).
        """
        data = record.to_log() if isinstance(record, RecordModel) else dict(record)
        keys = self.options.keys
        envelope = {"v": SCHEMA_VERSION, "id": new_id(), "ts": utc_now()}
        link = {k: p for k, p in _LINK.items() if k != "key_id" or keys is not None}
        # Serialised once: the redaction's hint pass reads the text the chain hashes (only the
        # record's own fields are walked, never the envelope), and the link is filled in.
        body: str | None = canonical({**envelope, **data, **link})
        if redact_record(data, body=body, key=keys.current.marker_key if keys else None):
            body = None  # a secret was replaced: serialised again (before any cut)
        data = {**envelope, **data}
        try:
            with self._mutex:
                self._write_locked(data, body)
        except OSError as exc:
            self._known_end = -1  # the file may not be what we think: read its tail again
            raise LogError(f"cannot write the verification log {self.path}: {exc}") from exc
        return data

    def _write_locked(self, record: dict[str, Any], body: str | None = None) -> None:
        size = os.fstat(self._fd).st_size
        prefix = b""
        if size != self._known_end:  # another writer appended, or first write
            self._tail = self._read_tail(size)
            prefix = b"" if self._tail.newline else b"\n"  # isolate a torn line
        tail = self._tail
        lines = [self._rotation(tail)] if self._must_rotate(tail) else []
        lines.append(self._chain(record, tail, body))
        data = prefix + b"".join(lines)
        append_line(self._fd, data, size, fsync=self.options.fsync)
        self._anchor(size, tail)
        self._known_end = size + len(data)

    def _read_tail(self, size: int) -> _Tail:
        tail = _tail_state(self._fd, size)
        if tail.seq is None:
            tail.seq = _count_hashed(self.path)
        return tail

    def _anchor(self, size: int, tail: _Tail) -> None:
        """Write the checkpoint of what was just appended; if it fails, take that back."""
        if self._checkpoints is None:
            return
        try:
            self._checkpoints.append(
                tail.seq or 0, tail.hash, self.options.keys, self.options.fsync
            )
        except OSError as exc:
            take_back(self._fd, size)
            where = self._checkpoints.path
            raise OSError(exc.errno, f"cannot write the log checkpoints {where}: {exc}") from exc

    def _must_rotate(self, tail: _Tail) -> bool:
        keys = self.options.keys
        return keys is not None and tail.key_id != keys.current.key_id

    def _rotation(self, tail: _Tail) -> bytes:
        """The record that changes the chain's key (or starts keying it): keyed with the new
        key, naming the old one, so the change is part of what the chain proves."""
        keys = self.options.keys
        assert keys is not None
        record = {"v": SCHEMA_VERSION, "id": new_id(), "ts": utc_now(), "kind": ROTATION}
        record |= {"from": tail.key_id, "to": keys.current.key_id}
        return self._chain(record, tail)

    def _chain(self, record: dict[str, Any], tail: _Tail, text: str | None = None) -> bytes:
        """Link ``record`` to ``tail``, hash (or MAC) it, and move ``tail`` on to it.

        ``text``: the record's canonical JSON already made, with :data:`_LINK` placeholders.
        """
        keys, limit = self.options.keys, self.options.max_field_bytes
        link: dict[str, Any] = {"prev": tail.hash, "seq": (tail.seq or 0) + 1}
        if keys is not None:
            link["key_id"] = keys.current.key_id
        record.update(link)
        body = (_linked(text, link) if text is not None else canonical(record)).encode()
        if limit and len(body) > limit:  # no field can be over the limit if all fit in it
            record.update(limit_record(record, limit))
            body = canonical(record).encode()
        digest = keys.current.record_mac(body) if keys else hashlib.sha256(body).hexdigest()
        record["hash"] = digest
        tail.hash, tail.seq, tail.key_id = digest, record["seq"], record.get("key_id")
        return body[:-1] + b',"hash":"' + digest.encode() + b'"}\n'


def _linked(text: str, link: dict[str, Any]) -> str:
    """The canonical text with each placeholder of :data:`_LINK` replaced by its value."""
    for name, value in link.items():
        text = text.replace(_LINKED[name], f'"{name}":' + json.dumps(value, ensure_ascii=False), 1)
    return text
