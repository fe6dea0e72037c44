"""The appender of the verification log: append-only JSONL with a hash chain.

Appends take a thread lock and an inter-process lock (:class:`lingyi._locks.FileMutex`, a
lock file beside the log), so threads and processes never interleave or lose records, on
Linux, macOS and Windows. Appending reads only the tail of the file, never the whole log:
cost does not grow with the log. A torn last line left by a crash is isolated on its own
line (the next record starts on a fresh line) and skipped by the chain, as
:mod:`lingyi.log.chain` describes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lingyi._ids import new_id, utc_now
from lingyi._locks import FileMutex, lock_path
from lingyi.errors import LogError
from lingyi.log.chain import GENESIS, canonical
from lingyi.log.records import SCHEMA_VERSION, RecordModel
from lingyi.redact import redact_record

_TAIL_BLOCK = 64 * 1024
# O_BINARY: on Windows, a text-mode descriptor would turn "\n" into "\r\n" and change what
# the hash covers; elsewhere the flag does not exist and is 0.
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)


def _last_hash(line: bytes) -> str | None:
    """The hash a new record links to, if ``line`` is a hashed record (chain rules)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    stored = value.get("hash") if isinstance(value, dict) else None
    return stored if isinstance(stored, str) else None


def _read_at(fd: int, start: int, size: int) -> bytes:
    # No os.pread: Windows has none. Positioning is safe: we hold the lock, and O_APPEND
    # writes go to the end whatever the position.
    os.lseek(fd, start, os.SEEK_SET)
    parts, left = [], size
    while left > 0 and (chunk := os.read(fd, left)):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _tail_state(fd: int, size: int) -> tuple[str, bool]:
    """The hash of the last hashed record, and whether the file ends with a newline."""
    if size == 0:
        return GENESIS, True
    block = _TAIL_BLOCK
    while True:
        start = max(0, size - block)
        data = _read_at(fd, start, size - start)
        lines = data.split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first piece may be the end of a longer line
        for raw in reversed(lines):
            if raw.strip() and (found := _last_hash(raw)) is not None:
                return found, data.endswith(b"\n")
        if start == 0:
            return GENESIS, data.endswith(b"\n")
        block *= 4


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte: a short write (a signal, a nearly full disk) continues, under the
    lock, right where it stopped, so the record stays whole and contiguous."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class VerificationLog:
    """Append records to one JSONL file, safely from many threads and processes."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._known_end = -1
        self._last_hash = GENESIS
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, _FLAGS, 0o644)
            self._mutex = FileMutex(lock_path(path))
        except OSError as exc:
            raise LogError(f"cannot open the verification log {path}: {exc}") from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._mutex.close()

    def __enter__(self) -> VerificationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, record: RecordModel | Mapping[str, Any]) -> dict[str, Any]:
        """Complete ``record`` (v, id, ts, prev, hash), write it, and return it.

        ``record`` is one of the models of :mod:`lingyi.log.records` or its JSON object.
        """
        data = record.to_log() if isinstance(record, RecordModel) else dict(record)
        data = {"v": SCHEMA_VERSION, "id": new_id(), "ts": utc_now(), **data}
        try:
            with self._mutex:
                self._write_locked(data)
        except OSError as exc:
            raise LogError(f"cannot write the verification log {self.path}: {exc}") from exc
        return data

    def _write_locked(self, record: dict[str, Any]) -> None:
        size = os.fstat(self._fd).st_size
        prefix = b""
        if size != self._known_end:  # another writer appended, or first write
            self._last_hash, ends_with_newline = _tail_state(self._fd, size)
            prefix = b"" if ends_with_newline else b"\n"  # isolate a torn line
        record["prev"] = self._last_hash
        body = canonical(record)
        if redact_record(record, body=body):  # the text is needed for the hash anyway: look once
            body = canonical(record)
        record["hash"] = hashlib.sha256(body.encode()).hexdigest()
        line = prefix + (body[:-1] + f',"hash":"{record["hash"]}"}}\n').encode()
        _write_all(self._fd, line)
        if self.fsync:
            os.fsync(self._fd)
        self._known_end = size + len(line)
        self._last_hash = record["hash"]
