"""One exclusive lock shared by the threads of a process and by other processes.

The log writer, the council record and appeals each serialise their writers through a lock
file next to the data (``<file>.lock``). The OS lock comes from ``filelock`` (``flock`` on
Linux and macOS, ``LockFileEx`` on Windows), so the package imports and runs everywhere.

Why a separate lock file and not the data file: Windows locks are mandatory, so locking the
log itself would make readers (stats, ``log tail``) fail while a writer holds it. Why a
descriptor kept open instead of ``filelock.FileLock``: that class opens and closes the lock
file on every acquire (about 90 µs here); locking a kept descriptor costs about 3 µs per
append, and a verification appends once.

``filelock`` is imported with the first lock taken, not with this module: it is 8–14 ms of
every ``lingyi serve`` start (its package builds its whole family of lock classes, not only
the two descriptor functions used here), and the server takes no lock before its first
tool call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

# While another process holds the lock we retry this often: an append holds it for tens of
# microseconds, so a short poll keeps contended appends fast without spinning hard.
POLL_S = 0.0005


def lock_path(path: Path) -> Path:
    """Where the lock of ``path`` lives: beside it, so every process finds the same one."""
    return path.with_name(path.name + ".lock")


class FileMutex:
    """``with mutex:`` holds ``path`` exclusively against this process's threads and others.

    Not reentrant: a thread that enters twice waits for itself (callers take it once).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.Lock()
        self._fd = -1
        self._lock: Callable[..., object] | None = None  # filelock's, bound on first use
        self._unlock: Callable[[int], None] = _no_unlock

    def __enter__(self) -> FileMutex:
        self._thread_lock.acquire()
        try:
            if self._lock is None:
                self._lock, self._unlock = _filelock()
            self._lock(self._descriptor(), poll_interval=POLL_S)
        except BaseException:
            self._thread_lock.release()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._unlock(self._fd)
        finally:
            self._thread_lock.release()

    def _descriptor(self) -> int:
        if self._fd < 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)
            self._fd = os.open(self.path, flags, 0o644)
        return self._fd

    def close(self) -> None:
        """Close the lock file (the lock is released if still held by a crashed block)."""
        with self._thread_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _filelock() -> tuple[Callable[..., object], Callable[[int], None]]:
    """filelock's descriptor lock and unlock, imported now (see the module docstring)."""
    from filelock import lock_descriptor, unlock_descriptor

    return lock_descriptor, unlock_descriptor


def _no_unlock(fd: int) -> None:
    """Before the first ``__enter__`` nothing is locked, so there is nothing to release."""
