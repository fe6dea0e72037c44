"""The current policy set, reloaded when a policy file changes.

A reload that fails keeps the last good set (the guard must not switch off because someone
saved a typo), and so does a reload that validates but would weaken the guard while it runs
(:mod:`._weakening` says what weakens it). Each is logged with the file and key. A start
applies the same rules against a baseline, the shipped policies (``baseline``): a weaker
folder does not start unless the config names each weakened check in ``[policies]
allow_weakening``, so a restart is no way around them either.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lingyi._logging import get_logger
from lingyi.errors import PolicyError
from lingyi.models import OnFail
from lingyi.policy._load import ignored_reason, load_policies
from lingyi.policy._model import PolicySet
from lingyi.policy._weakening import start_weakenings, weakenings

log = get_logger()


class PolicyStore:
    """The current policy set, reloaded when a file in the folder changes."""

    def __init__(
        self,
        folder: Path,
        *,
        check_interval_s: float = 1.0,
        require_shared: bool = True,
        judge_on_fail: OnFail = OnFail.REJECT,
        baseline: Path | None = None,
        allow_weakening: Sequence[str] = (),
    ) -> None:
        self.folder = folder
        # What a judge rule without on_fail does (the config's [judge] on_fail): a reload that
        # drops a rule's own "reject" falls back to it, which may be softer.
        self.judge_on_fail = judge_on_fail
        self.interval = check_interval_s
        self.require_shared = require_shared
        self.refused: list[PolicyError] = []  # why the last reload was not applied, if it was not
        self._lock = threading.Lock()
        self._stamp = self._fingerprint()
        self._set = load_policies(folder, require_shared=require_shared)
        if baseline is not None and baseline.resolve() != folder.resolve():
            refuse_weaker(self._set, baseline, allow_weakening, judge_on_fail)
        self._checked = time.monotonic()
        # The gateway merges its upstreams' tool schemas into each loaded set (see extend).
        self._extend: Callable[[PolicySet], PolicySet] | None = None
        self._extended: tuple[PolicySet, PolicySet] | None = None

    def current(self) -> PolicySet:
        now = time.monotonic()
        if now - self._checked >= self.interval:
            with self._lock:
                self._checked = now
                self._maybe_reload()
        return self._with_extension(self._set)

    def extend(self, fn: Callable[[PolicySet], PolicySet] | None) -> None:
        """Apply ``fn`` to every set this store hands out (again after each reload), so an
        upstream tool's policy is always merged with the upstream's own schema."""
        with self._lock:
            self._extend, self._extended = fn, None

    def _with_extension(self, loaded: PolicySet) -> PolicySet:
        fn, done = self._extend, self._extended
        if fn is None:
            return loaded
        if done is None or done[0] is not loaded:
            done = self._extended = (loaded, fn(loaded))
        return done[1]

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        """Policy files and lexicon files (in sub-folders) by name, mtime and size; hidden and
        editor files (an editor's lock) are not policies, and a file gone since the listing
        is simply not in it."""
        found = []
        for path in sorted(self.folder.rglob("*.toml")):
            if any(part.startswith(".") for part in path.relative_to(self.folder).parts):
                continue
            if ignored_reason(path) is not None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            found.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(found)

    def _maybe_reload(self) -> None:
        stamp = self._fingerprint()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            reloaded = load_policies(self.folder, require_shared=self.require_shared)
        except PolicyError as exc:
            log.error("policy reload failed; keeping the last good policies", error=str(exc))
            return
        self.refused = weakenings(self._set, reloaded, judge_on_fail=self.judge_on_fail)
        for problem in self.refused:
            log.error(
                "policy reload refused: it would weaken the guard; keeping the last good policies",
                file=problem.path,
                key=problem.key,
                problem=problem.message,
            )
        if not self.refused:
            self._set = reloaded
            log.info("policies reloaded", version=reloaded.version)


def refuse_weaker(
    policies: PolicySet, baseline: Path, allow: Sequence[str], judge_on_fail: OnFail
) -> None:
    """Refuse to start on policies weaker than ``baseline`` (the shipped ones): the first
    problem, saying how many more there are, as a load error does."""
    shipped = _baseline(str(baseline))
    found = start_weakenings(shipped, policies, allow, judge_on_fail=judge_on_fail)
    if not found:
        return
    first, more = found[0], len(found) - 1
    note = f" (and {more} more: lingyi policy check lists them all)" if more else ""
    raise PolicyError(first.path, first.key, first.message + note)


@functools.lru_cache(maxsize=2)
def _baseline(folder: str) -> PolicySet:
    """The shipped policies, loaded once a process: they are part of the installed package."""
    return load_policies(Path(folder))
