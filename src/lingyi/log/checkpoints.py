"""Checkpoints: the log's length and last hash, signed, kept in another file.

A chain proves what is in the log, not that nothing was cut off its end: keeping the first 40
of 50 records leaves a valid chain. So the writer appends, after each record (or every N),
a checkpoint ``{"seq", "hash", "ts", "key_id", "mac"}`` to the file ``[log] checkpoints``
names: the record's sequence number and hash, MAC'd with the log key (a checkpoint key
derived from it, see :mod:`lingyi.log.keys`). ``lingyi log verify`` then finds a record whose
hash differs from its checkpoint (a rewrite) and a checkpoint beyond the end of the log (a
cut-off tail). Without a key the checkpoints are unsigned: they find an accidental cut, not
a forged one.

The file only helps if whoever can rewrite the log cannot rewrite it too: put it on another
disk or machine, in a directory only the guard's user can write, or make it append-only
(``chattr +a`` on Linux). Appends happen under the log's lock, so checkpoints are in order.
A checkpoint that cannot be written fails the append like the record itself (the writer takes
the record back), so the log never holds records its anchor does not cover.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lingyi._ids import utc_now
from lingyi.errors import LogError
from lingyi.log.chain import canonical
from lingyi.log.io import append_line, isolate_torn_line
from lingyi.log.keys import KeyRing
from lingyi.log.reader import read_log

MAX_LISTED = 100


def checkpoint_line(seq: int, last_hash: str, keys: KeyRing | None) -> bytes:
    """One checkpoint as the writer appends it (signed with the current key, if any)."""
    data: dict[str, Any] = {"seq": seq, "hash": last_hash, "ts": utc_now()}
    if keys is not None:
        data["key_id"] = keys.current.key_id
        data["mac"] = keys.current.checkpoint_mac(canonical(data).encode())
    return (canonical(data) + "\n").encode()


class CheckpointFile:
    """The writer's side: one descriptor, appended to under the log's lock."""

    def __init__(self, path: Path, every: int = 1) -> None:
        self.path, self.every = path, max(1, every)
        self._known_end = -1
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _BINARY, 0o644)
        except OSError as exc:
            raise LogError(f"cannot open the log checkpoints {path}: {exc}") from exc

    def append(self, seq: int, last_hash: str, keys: KeyRing | None, fsync: bool = False) -> None:
        """Write the checkpoint of record ``seq``, whole or not at all (raises OSError)."""
        if seq % self.every:
            return
        size = os.fstat(self._fd).st_size
        prefix = isolate_torn_line(self._fd, size) if size != self._known_end else b""
        line = prefix + checkpoint_line(seq, last_hash, keys)
        append_line(self._fd, line, size, fsync=fsync)
        self._known_end = size + len(line)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no "\n" → "\r\n" in what the MAC covers


@dataclass
class Checkpoint:
    lineno: int
    seq: int
    hash: str


@dataclass
class CheckpointReport:
    """What checking the checkpoints against the log found; ``ok`` when nothing is wrong.

    ``signed`` counts checkpoints whose MAC verified; ``unsigned`` those without one (no key
    when written), ``unchecked`` those signed with no key given to check them; ``bad`` those
    refused (a wrong MAC, an unknown key, out of order, not a
    checkpoint), with ``mismatched`` (the log's record differs) and ``beyond_end`` (the log
    is shorter than a checkpoint says: a cut-off tail) the findings against the log.
    """

    path: str
    present: bool = True
    checkpoints: int = 0
    signed: int = 0
    unsigned: int = 0
    unchecked: int = 0
    bad: int = 0
    mismatched: int = 0
    beyond_end: int = 0
    last_seq: int | None = None  # the last checkpoint's record
    log_seq: int = 0  # the log's last record
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.bad == self.mismatched == self.beyond_end == 0

    def note(self, text: str) -> None:
        if len(self.problems) < MAX_LISTED:
            self.problems.append(text)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, **{k: v for k, v in vars(self).items()}}


def refusal(data: dict[str, Any], keys: KeyRing | None) -> tuple[str | None, str]:
    """Why a parsed checkpoint is refused (its signature), or None; and how it was found:
    ``signed`` (its MAC verified), ``unsigned`` (no key, none needed), ``unchecked``
    (signed, and no key given to check it with)."""
    mac = data.get("mac")
    if mac is None:
        return ("unsigned, but the log is keyed" if keys is not None else None), "unsigned"
    key = keys.get(data.get("key_id")) if keys is not None else None
    if key is None:
        if keys is None:  # signed, and no key to check it with: not trusted, noted
            return None, "unchecked"
        return f"signed with key {data.get('key_id')}, not in {keys.source}", "signed"
    body = canonical({k: v for k, v in data.items() if k != "mac"}).encode()
    if key.checkpoint_mac(body) != mac:
        return "the MAC does not match (a forged or edited checkpoint)", "signed"
    return None, "signed"


def parse_checkpoint(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    ok = isinstance(value, dict) and isinstance(value.get("seq"), int)
    return value if ok and isinstance(value.get("hash"), str) else None


class CheckpointChecker:
    """Reads the checkpoints in step with the log: fed each record's (seq, hash) in order."""

    def __init__(self, path: Path, keys: KeyRing | None) -> None:
        self.keys = keys
        self.report = CheckpointReport(str(path), present=path.is_file())
        self._pending = self._valid(path)
        self._next = next(self._pending, None)

    def _valid(self, path: Path) -> Iterator[Checkpoint]:
        """The checkpoints that pass, in file order; the others are counted and noted."""
        report, last = self.report, 0
        for line in read_log(path):
            report.checkpoints += 1
            data = parse_checkpoint(line.raw)
            why = "not a checkpoint" if data is None else self._refusal(data)
            if data is not None and why is None and data["seq"] <= last:
                why = f"seq {data['seq']} after seq {last} (out of order)"
            if why is not None or data is None:
                report.bad += 1
                report.note(f"checkpoints line {line.lineno}: {why}")
                continue
            last = data["seq"]
            report.last_seq = last
            yield Checkpoint(line.lineno, last, data["hash"])

    def _refusal(self, data: dict[str, Any]) -> str | None:
        """Why a parsed checkpoint is refused (its signature), or None; counts signed ones."""
        why, how = refusal(data, self.keys)
        if why is None:
            setattr(self.report, how, getattr(self.report, how) + 1)
        return why

    def record(self, seq: int, record_hash: str, lineno: int) -> None:
        """The log's record ``seq`` at ``lineno`` has ``record_hash``."""
        self.report.log_seq = seq
        while self._next is not None and self._next.seq <= seq:
            point, self._next = self._next, next(self._pending, None)
            if point.seq == seq and point.hash != record_hash:
                self.report.mismatched += 1
                self.report.note(
                    f"line {lineno}: record {seq} has hash {record_hash[:16]}…, checkpoints "
                    f"line {point.lineno} says {point.hash[:16]}… (the record was rewritten)"
                )
            elif point.seq < seq:
                self.report.mismatched += 1
                self.report.note(
                    f"checkpoints line {point.lineno}: record {point.seq} is not in the log"
                )

    def finish(self) -> CheckpointReport:
        """At the end of the log: any checkpoint left is beyond its end (a cut-off tail)."""
        report = self.report
        while self._next is not None:
            point, self._next = self._next, next(self._pending, None)
            report.beyond_end += 1
            if report.beyond_end == 1:
                report.note(
                    f"the log ends at record {report.log_seq}, but checkpoints line "
                    f"{point.lineno} says record {point.seq} was written (records were cut "
                    "off the end of the log)"
                )
        return report
