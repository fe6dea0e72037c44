"""Appending whole lines to a file that other processes append to, under their shared lock.

Why by hand: a short write (a signal, a nearly full disk, a file-size limit) must continue
right where it stopped so that the line stays whole and contiguous, and a write that fails
must leave the file as it was, so that the log never holds half a record. Both need the
descriptor and the size before the write, which the callers hold under their lock.
"""

from __future__ import annotations

import contextlib
import os

# O_BINARY: on Windows, a text-mode descriptor would turn "\n" into "\r\n" and change what
# the hash covers; elsewhere the flag does not exist and is 0.
APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)


def read_at(fd: int, start: int, size: int) -> bytes:
    # No os.pread: Windows has none. Positioning is safe: we hold the lock, and O_APPEND
    # writes go to the end whatever the position.
    os.lseek(fd, start, os.SEEK_SET)
    parts, left = [], size
    while left > 0 and (chunk := os.read(fd, left)):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def isolate_torn_line(fd: int, size: int) -> bytes:
    """The prefix that starts the next line on a line of its own: a newline after a torn
    last line (a crash mid-write), nothing otherwise."""
    return b"" if size == 0 or read_at(fd, size - 1, 1) == b"\n" else b"\n"


def append_line(fd: int, data: bytes, size: int, *, fsync: bool = False) -> None:
    """Write every byte of ``data`` at the end of a file ``size`` bytes long, or nothing.

    A short write continues where it stopped; an error (no space, a size limit, an I/O
    error) cuts the file back to ``size`` and raises the OSError. If even the cut fails, the
    torn line stays and the next append isolates it (:func:`isolate_torn_line`).
    """
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    except OSError:
        take_back(fd, size)
        raise


def take_back(fd: int, size: int) -> None:
    """Cut the file back to ``size`` (best effort: the caller is already failing)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)
