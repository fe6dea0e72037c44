"""The current policy set, reloaded when a policy file changes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import structlog

from lingyi.errors import PolicyError
from lingyi.policy._load import load_policies
from lingyi.policy._model import PolicySet

log = structlog.get_logger()


class PolicyStore:
    """The current policy set, reloaded when a file in the folder changes.

    A reload that fails keeps the last good set (the guard must not switch off because
    someone saved a typo) and logs the error with file and key.
    """

    def __init__(self, folder: Path, *, check_interval_s: float = 1.0) -> None:
        self.folder = folder
        self.interval = check_interval_s
        self._lock = threading.Lock()
        self._stamp = self._fingerprint()
        self._set = load_policies(folder)
        self._checked = time.monotonic()

    def current(self) -> PolicySet:
        now = time.monotonic()
        if now - self._checked >= self.interval:
            with self._lock:
                self._checked = now
                self._maybe_reload()
        return self._set

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        """Policy files and lexicon files (in sub-folders) by name, mtime and size."""
        stats = ((str(p), p.stat()) for p in sorted(self.folder.rglob("*.toml")))
        return tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats)

    def _maybe_reload(self) -> None:
        stamp = self._fingerprint()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._set = load_policies(self.folder)
            log.info("policies reloaded", version=self._set.version)
        except PolicyError as exc:
            log.error("policy reload failed; keeping the last good policies", error=str(exc))
