"""The one way to read the verification log: forwards as a stream, or backwards from the end.

:func:`read_log` streams every non-empty line once (memory does not grow with the log) and
keeps each line's bytes, which the chain verifier's fast path hashes without re-serialising.
:func:`tail_records` reads blocks backwards from the end and stops as soon as it has what was
asked for, so ``log tail`` and the MCP ``recent`` resource cost the same on a log of a
thousand records or of ten million, and a record of any size (even larger than a block) is
read whole. Unreadable lines (a torn last line after a crash, garbage) are yielded with the
reason, never raised: a damaged line must not hide the records around it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from lingyi.errors import LogError
from lingyi.log.records import record_kind

BLOCK = 64 * 1024  # bytes read per step backwards


@dataclass(slots=True)  # one per line read: not frozen, whose __init__ costs twice as much
class LogLine:
    """One line of the log as read: the record, or why it could not be read.

    ``lineno`` counts physical lines from 1; it is 0 for lines read backwards, whose number
    is not known without reading the whole file (see :func:`line_numbers`).
    """

    lineno: int
    record: dict[str, Any] | None
    error: str | None = None
    raw: bytes = b""
    offset: int = 0  # where the line starts in the file, in bytes


# Integers beyond 64 bits are the one thing orjson reads otherwise than json (as floats, not
# ints). A number token starts after ":", ",", "[" or a space, with an optional "-": seen
# through this table (digits and "-" → "0", those → ":", the rest → "x"), a line that could
# hold one shows ":" then 19 zeros, and is left to json. One search instead of one per sign:
# "-" as a digit only adds lines that json reads too (ids of 19 digits after a colon, a
# "-" among 18 digits), and json's value is the answer for every line.
_NUMBER_SHAPE = bytes(
    0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x3A if b in b":,[ \t\r\n" else 0x78
    for b in range(256)
)
_LONG_INT = b":" + b"0" * 19
_orjson: Any = None  # imported on first use: the commands that never read the log skip it


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``, exactly, about three times faster on a log line.

    orjson reads the line where it reads it as json does; anything it refuses (NaN, lone
    surrogates, a BOM, bad UTF-8, deep nesting) and any line that could hold an integer
    beyond 64 bits goes to json, whose value or error (and message) is the answer.
    """
    global _orjson
    if _LONG_INT in raw.translate(_NUMBER_SHAPE):
        return json.loads(raw)
    if _orjson is None:
        import orjson

        _orjson = orjson
    try:
        return _orjson.loads(raw)
    except _orjson.JSONDecodeError:
        return json.loads(raw)


def decode_line(lineno: int, raw: bytes, offset: int = 0) -> LogLine:
    """Parse one line; a line that is not a JSON object comes back with the reason."""
    try:
        value = loads(raw)
    except (ValueError, RecursionError) as exc:  # nested deeper than json reads: not fatal
        if not raw.endswith(b"\n"):
            error = "torn line (no newline: an interrupted write)"
        else:
            error = f"not JSON (an interrupted write, or corrupted): {exc}"
        return LogLine(lineno, None, error, raw, offset)
    if not isinstance(value, dict):
        return LogLine(lineno, None, "not a JSON object", raw, offset)
    return LogLine(lineno, value, None, raw, offset)


def open_log(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None  # no log yet: nothing to read
    except OSError as exc:
        raise LogError(f"cannot read the verification log {path}: {exc}") from exc


def raw_lines(
    path: Path, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """``(lineno, offset, bytes)`` of every physical line from byte ``start`` (a line start).

    Empty lines are yielded too, so the last ``lineno`` is the number of lines read (stats
    add it up across chunks). ``end`` stops at the first line starting at or after it;
    None reads to the end, lines appended meanwhile included.
    """
    handle = open_log(path)
    if handle is None:
        return
    with handle:
        handle.seek(start)
        offset = start
        for lineno, raw in enumerate(handle, start=1):
            if end is not None and offset >= end:
                return
            yield lineno, offset, raw
            offset += len(raw)


def read_log(path: Path) -> Iterator[LogLine]:
    """Stream the log line by line, in order (a missing log reads as empty)."""
    for lineno, offset, raw in raw_lines(path):
        if raw.strip():
            yield decode_line(lineno, raw, offset)


# --------------------------------------------------------------------------- backwards


def reversed_lines(path: Path, block: int = BLOCK) -> Iterator[LogLine]:
    """The log's lines from the last to the first (``lineno`` 0, ``offset`` exact).

    Memory holds one block plus the line being assembled, however long that line is.
    """
    handle = open_log(path)
    if handle is None:
        return
    with handle:
        end = handle.seek(0, os.SEEK_END)
        for offset, raw in _reverse_chunks(handle, end, block):
            if raw.strip():
                yield decode_line(0, raw, offset)


def _reverse_chunks(handle: BinaryIO, end: int, block: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line bytes)`` backwards; a line longer than a block is joined from parts."""
    pending: list[bytes] = []  # the pieces (last first) of a line not yet complete
    position = end
    while position > 0:
        start = max(0, position - block)
        handle.seek(start)
        data = handle.read(position - start)
        position = start
        cut = search = len(data)  # a line is data[after its start : cut], its "\n" included
        while (newline := data.rfind(b"\n", 0, search)) >= 0:
            line = b"".join([data[newline + 1 : cut], *reversed(pending)])
            pending = []
            if line:
                yield start + newline + 1, line
            cut, search = newline + 1, newline
        pending.append(data[:cut])
    line = b"".join(reversed(pending))
    if line:
        yield 0, line


def tail_records(
    path: Path, n: int, *, kinds: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """The last ``n`` readable records (of ``kinds``, default every kind), oldest first.

    Reads backwards from the end and stops once ``n`` are found; unreadable lines (a torn
    last line) are passed over.
    """
    found: list[dict[str, Any]] = []
    if n <= 0:
        return found
    for line in reversed_lines(path):
        record = line.record
        if record is not None and (kinds is None or record_kind(record) in kinds):
            found.append(record)
            if len(found) >= n:
                break
    found.reverse()
    return found
