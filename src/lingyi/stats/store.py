"""The rollup file beside the log (``<log>.rollup``): its format, its seal, and its anchors.

The file is a cache: it can be deleted at any time and is rebuilt from the log. It is JSON
lines so that a window reads only its own days:

* line 1, the **seal**: ``{"key_id", "mac"}``, the HMAC-SHA256 of everything after it with a
  key derived from the log key (``[log] key_env``/``key_file``), or its plain sha256 when the
  log has no key; a file that was cut, edited or forged by someone without the key fails
  it and is rebuilt;
* line 2, the **header**: the schema, the log position the rollup covers (byte offset and
  line count, and the ``seq`` and ``hash`` of the last hashed record), anchors, the ids of
  the keys the chain was checked with, the chain verifier's state, the integrity findings,
  the appeals without a snapshot and their verifications, and where each zone's days are;
* one line per (zone, local day): its cells and appeals (:class:`~lingyi.stats.days.Day`).

**Tied to the log.** The rollup is used only if the log still holds, at the recorded
offsets, the lines it was built from: the line that ends at the position (the last record's
``seq`` and ``hash`` included) and up to 32 anchor lines spread over the log, each compared
by length and digest. A log that was cut, replaced, rotated, or edited so that a line moved
is found this way and the rollup is rebuilt; so is a rollup built with other keys. An edit
that keeps every length and misses the anchors is not found here; ``lingyi log verify`` and
``lingyi stats --full`` reread the log and find it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lingyi.log.keys import KeyRing, LogKey
from lingyi.stats.builder import (
    RollupBuilder,
    chain_state,
    integrity_state,
    restore_chain,
    restore_integrity,
)
from lingyi.stats.days import Day, ZoneDays
from lingyi.stats.window import WindowError, resolve_zone

# 2: cells keep the judge's figures; 3: appeals count the upheld approvals apart; 4: cells
# keep the shadow figures; 5: approval events per day; 6: cells count call outcomes (failed,
# held, refused) per tool (an older rollup is rebuilt from the log)
ROLLUP_SCHEMA = "lingyi.stats-rollup/6"
ANCHORS = 32  # lines compared against the log, spread over it, besides the last one
_DIGEST_PART = 4096  # a long line is compared by its length, first and last 4 KB
_PURPOSE = b"lingyi stats rollup mac v1"


def rollup_path(log: Path) -> Path:
    return log.with_name(log.name + ".rollup")


@dataclass
class Position:
    """How far the rollup has read: a line boundary of the log, and what the log holds there."""

    offset: int = 0
    lines: int = 0  # physical lines before ``offset``
    seq: int | None = None  # of the last hashed record before ``offset``
    hash: str | None = None
    last: list[Any] | None = None  # the line that ends at ``offset``: [offset, length, digest]
    anchors: list[list[Any]] = field(default_factory=list)  # lines spread over the log

    def as_json(self) -> dict[str, Any]:
        return dict(vars(self))


# --------------------------------------------------------------------------- the seal


def _rollup_key(key: LogKey) -> bytes:
    # A key of its own, derived from the record key: a rollup MAC is never a record MAC.
    return hmac.new(key.record_key, _PURPOSE, hashlib.sha256).digest()


def _seal(body: bytes, keys: KeyRing | None) -> bytes:
    if keys is None:
        seal = {"key_id": None, "mac": hashlib.sha256(body).hexdigest()}
    else:
        mac = hmac.new(_rollup_key(keys.current), body, hashlib.sha256).hexdigest()
        seal = {"key_id": keys.current.key_id, "mac": mac}
    return json.dumps(seal).encode() + b"\n"


def _unsealed(data: bytes, keys: KeyRing | None) -> bytes | None:
    """The body after a seal that verifies with ``keys``; None otherwise."""
    end = data.find(b"\n")
    try:
        seal = json.loads(data[:end])
    except ValueError:
        return None
    body = data[end + 1 :]
    if not isinstance(seal, dict) or not isinstance(seal.get("mac"), str):
        return None
    expected: str | None = None
    if keys is None and seal.get("key_id") is None:
        expected = hashlib.sha256(body).hexdigest()
    elif keys is not None and (key := keys.get(seal.get("key_id"))) is not None:
        expected = hmac.new(_rollup_key(key), body, hashlib.sha256).hexdigest()
    ok = expected is not None and hmac.compare_digest(expected, seal["mac"])
    return body if ok else None


def key_ids(keys: KeyRing | None) -> list[str] | None:
    return None if keys is None else sorted(keys.keys)


# --------------------------------------------------------------------------- anchors


def _digest(handle: BinaryIO, offset: int, length: int) -> str:
    """Digest of a line: all of it, or its first and last 4 KB when it is longer."""
    handle.seek(offset)
    if length <= 2 * _DIGEST_PART:
        data = handle.read(length)
    else:
        data = handle.read(_DIGEST_PART)
        handle.seek(offset + length - _DIGEST_PART)
        data += handle.read(_DIGEST_PART)
    return hashlib.sha256(data).hexdigest()[:32]


def _line_at(handle: BinaryIO, start: int, end: int) -> list[Any] | None:
    """[offset, length, digest] of the line starting at ``start``, if it ends by ``end``."""
    handle.seek(start)
    length = 0
    while chunk := handle.readline(1 << 20):
        length += len(chunk)
        if chunk.endswith(b"\n"):
            break
    if length == 0 or start + length > end:
        return None
    return [start, length, _digest(handle, start, length)]


def last_line_start(handle: BinaryIO, end: int) -> int:
    """Where the line that ends at ``end`` (with its newline) starts."""
    position, block = end - 1, 64 * 1024
    while position > 0:
        start = max(0, position - block)
        handle.seek(start)
        cut = handle.read(position - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        position = start
    return 0


def last_line(handle: BinaryIO, end: int) -> list[Any] | None:
    """[offset, length, digest] of the line that ends at ``end``."""
    return _line_at(handle, last_line_start(handle, end), end) if end > 0 else None


def make_anchors(handle: BinaryIO, end: int) -> list[list[Any]]:
    """Lines spread over ``[0, end)``, to find a log that changed under the rollup."""
    anchors: list[list[Any]] = []
    for i in range(ANCHORS if end > 0 else 0):
        target = end * i // ANCHORS
        if target > 0:
            handle.seek(target - 1)
            handle.readline()  # to the start of the next line
            target = handle.tell()
        found = _line_at(handle, target, end)
        if found is not None and (not anchors or found[0] != anchors[-1][0]):
            anchors.append(found)
    return anchors


def anchors_match(handle: BinaryIO, anchors: list[list[Any]], size: int) -> bool:
    """Does the log hold each anchor's line (same length, same digest) where it was?"""
    for offset, length, digest in anchors:
        if offset + length > size or _digest(handle, offset, length) != digest:
            return False
    return True


def _last_record_matches(handle: BinaryIO, position: Position) -> bool:
    """The line at the position is the last hashed record the rollup read (seq and hash)."""
    if position.last is None or position.hash is None:
        return True
    offset, length, _ = position.last
    handle.seek(offset)
    try:
        record = json.loads(handle.read(length))
    except ValueError:
        return True  # a line that is not a record: its digest was compared already
    if not isinstance(record, dict) or "hash" not in record:
        return True
    return record.get("hash") == position.hash and record.get("seq") == position.seq


# --------------------------------------------------------------------------- load, save


def decode_day(raw: bytes) -> Day:
    return Day.from_state(json.loads(raw))


@dataclass
class Loaded:
    """A rollup read back: the builder to resume, and where it stopped."""

    builder: RollupBuilder
    position: Position


def load(log: Path, keys: KeyRing | None) -> Loaded | str:
    """The rollup of ``log`` if it is sealed, of this schema and keys, and matches the log;
    otherwise why not (a short text for the logs)."""
    try:
        data = rollup_path(log).read_bytes()
    except FileNotFoundError:
        return "no rollup yet"
    except OSError as exc:
        return f"cannot read the rollup: {exc}"
    body = _unsealed(data, keys)
    if body is None:
        return "the rollup's seal does not verify (cut, edited, or made with another key)"
    lines = body.split(b"\n")
    try:
        header = json.loads(lines[0])
    except ValueError:
        return "the rollup's header is not JSON"
    if header.get("schema") != ROLLUP_SCHEMA:
        return f"rollup schema {header.get('schema')!r}, not {ROLLUP_SCHEMA}"
    if header["keys"] != key_ids(keys):
        return "the rollup was checked with other keys"
    position = Position(**header["position"])
    if (why := _mismatch(log, position)) is not None:
        return why
    return Loaded(_builder(header, lines, keys), position)


def _mismatch(log: Path, position: Position) -> str | None:
    try:
        with log.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < position.offset:
                return f"the log is shorter ({size} bytes) than the rollup ({position.offset})"
            lines = position.anchors + ([position.last] if position.last else [])
            if not anchors_match(handle, lines, size):
                return "the log does not hold the lines the rollup was built from"
            if not _last_record_matches(handle, position):
                return "the log's record at the rollup's position has another seq or hash"
    except FileNotFoundError:
        return "no log" if position.offset else None
    return None


def _builder(header: dict[str, Any], lines: list[bytes], keys: KeyRing | None) -> RollupBuilder:
    zones = []
    for name, days in header["zones"]:
        try:
            zone = ZoneDays(name, resolve_zone(name))
        except WindowError:
            continue  # a zone this machine does not know: dropped, rebuilt if asked for
        zone.raw = {day: lines[index] for day, index in days.items()}
        zones.append(zone)
    builder = RollupBuilder(zones, keys=keys)
    builder.chain = restore_chain(header["chain"], keys)
    builder.integrity = restore_integrity(header["integrity"])
    builder.pending_subjects = header["pending"]
    builder.subjects = header["subjects"]
    builder.last_seq, builder.last_hash = header["position"]["seq"], header["position"]["hash"]
    return builder


def save(log: Path, builder: RollupBuilder, position: Position, keys: KeyRing | None) -> None:
    """Write the rollup whole, atomically (a temporary file renamed over it); OSError if not."""
    day_lines: list[bytes] = []
    zones = []
    for zone in builder.zones.values():
        index = {}
        for name in sorted({*zone.days, *zone.raw}):
            index[name] = len(day_lines) + 1
            day = zone.days.get(name)
            raw = zone.raw.get(name)
            day_lines.append(raw if day is None and raw is not None else _encode_day(day))
        zones.append([zone.name, index])
    header = {
        "schema": ROLLUP_SCHEMA,
        "position": position.as_json(),
        "keys": key_ids(keys),
        "chain": chain_state(builder.chain),
        "integrity": integrity_state(builder.integrity),
        "pending": builder.pending_subjects,
        "subjects": builder.subjects,
        "zones": zones,
    }
    body = b"\n".join([_json(header), *day_lines])
    _write_atomically(rollup_path(log), _seal(body, keys) + body)


def _encode_day(day: Day | None) -> bytes:
    assert day is not None
    return _json(day.as_state())


def _json(value: Any) -> bytes:
    # ASCII: a lone surrogate read from the log (JSON allows it) must not fail the write.
    return json.dumps(value, separators=(",", ":")).encode()


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
