"""Change detection off the request path: a file watcher, and a full check now and then.

The watcher (``watchfiles``: inotify, FSEvents, ReadDirectoryChangesW) reports the paths that
changed; those files alone are re-indexed, within about ``STEP_MS`` of the last write. A full
check (every file's signature against the index) runs every ``interval`` seconds to catch what
a watcher can miss (a symlink's target edited, an overflowing event queue, a network file
system), and is the only detection when no watcher can run (then a warning is logged and
the check runs every ``POLL_S`` seconds). A full check is spaced at least ``SPACING`` times
its own duration from the next one, so that it never takes more than a small share of a
core, whatever the size of the folder.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from lingyi._logging import get_logger
from lingyi.backends.kb.indexer import Indexer, visible_file
from lingyi.errors import BackendError

log = get_logger()

STEP_MS = 50  # a change is handled once the folder has been quiet this long
DEBOUNCE_MS = 400  # ... or at the latest this long after the first change
SPACING = 20  # a full check waits at least 20 times its own duration for the next
POLL_S = 10.0  # full checks when no watcher can run (at most; check_interval if shorter)
_ERRORS = (OSError, sqlite3.Error, BackendError)


class Background:
    """The thread that keeps one knowledge base's index up to date."""

    def __init__(self, root: Path, indexer: Indexer, *, watch: bool, interval: float) -> None:
        self._root, self._indexer = root, indexer
        self._watch, self._interval = watch, interval
        self._stop = threading.Event()
        self._next_check = time.monotonic() + interval
        self._thread = threading.Thread(target=self._run, name="kb-changes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._indexer.stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        if not (self._watch and self._follow_watcher()):
            while not self._stop.wait(max(0.0, self._next_check - time.monotonic())):
                self._full_check()

    def _follow_watcher(self) -> bool:
        """Handle the watcher's reports until stopped; False when no watcher could run."""
        # One full check as soon as the watcher reports (or times out, within a second):
        # a change made between the index's first build and the watcher's start is in no event.
        self._next_check = time.monotonic()
        try:
            import watchfiles  # imported here: a KB opened for one search needs no watcher

            changes = watchfiles.watch(
                self._root,
                watch_filter=None,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                stop_event=self._stop,
                rust_timeout=1000,
                yield_on_timeout=True,
                raise_interrupt=False,
            )
            for batch in changes:
                self._handle({path for _, path in batch})
                if time.monotonic() >= self._next_check:
                    self._full_check()
        except (ImportError, OSError, RuntimeError) as exc:  # e.g. the inotify limit is reached
            log.warning("kb.watch_unavailable", folder=str(self._root), error=str(exc))
            # Polling from now on, more often, starting at once: events may have been lost.
            self._interval, self._next_check = min(self._interval, POLL_S), time.monotonic()
            return self._stop.is_set()
        return True

    def _handle(self, paths: Iterable[str]) -> None:
        files, folders = self._classify(paths)
        try:
            for folder in folders:
                self._indexer.reconcile(folder)
            inside = tuple(f + "/" for f in folders)
            self._indexer.update(f for f in files if not f.startswith(inside))
        except _ERRORS as exc:
            log.warning("kb.update_failed", folder=str(self._root), error=str(exc))

    def _classify(self, paths: Iterable[str]) -> tuple[set[str], list[str]]:
        """Changed Markdown files, and folders whose files must be compared (moved, gone)."""
        files: set[str] = set()
        folders: set[str] = set()
        for raw in paths:
            path = Path(raw)
            if not path.is_relative_to(self._root) or path == self._root:
                continue
            rel = path.relative_to(self._root).as_posix()
            if any(part.startswith(".") for part in rel.split("/")):
                continue
            if visible_file(path):
                files.add(rel)
            elif path.is_dir() or self._indexer.knows_folder(rel):
                folders.add(rel)
        # A folder inside another one that is compared anyway needs no comparison of its own.
        ordered = sorted(folders)
        return files, [f for f in ordered if not any(f.startswith(o + "/") for o in ordered)]

    def _full_check(self) -> None:
        start = time.monotonic()
        try:
            self._indexer.reconcile()
        except _ERRORS as exc:
            log.warning("kb.refresh_failed", folder=str(self._root), error=str(exc))
        took = time.monotonic() - start
        self._next_check = time.monotonic() + max(self._interval, SPACING * took)
