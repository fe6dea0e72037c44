"""The current policy set, reloaded when a policy file changes.

A reload that fails keeps the last good set (the guard must not switch off because someone
saved a typo), and so does a reload that validates but would weaken the guard while it runs:
drop a shared check or a boundary check from a member, soften either's ``on_fail``, or hand a
tool to another member. Each is logged with the file and key; a restart applies such a change
on purpose (start-up has nothing to compare against, and every rule of the loader holds).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from lingyi.errors import PolicyError
from lingyi.models import OnFail, Stage
from lingyi.policy._load import ignored_reason, load_policies
from lingyi.policy._model import MemberPolicy, PolicySet

log = structlog.get_logger()

_STRENGTH = {OnFail.REJECT: 2, OnFail.FALLBACK: 1, OnFail.WARN: 0}
_RESTART = "refused: the last good policies stay (restart the server to apply it on purpose)"


class PolicyStore:
    """The current policy set, reloaded when a file in the folder changes."""

    def __init__(
        self,
        folder: Path,
        *,
        check_interval_s: float = 1.0,
        require_shared: bool = True,
        cache: bool = True,
    ) -> None:
        self.folder = folder
        self.interval = check_interval_s
        self.require_shared = require_shared
        self.cache = cache  # the TOML parse cache (lingyi.policy._cache)
        self.refused: list[PolicyError] = []  # why the last reload was not applied, if it was not
        self._lock = threading.Lock()
        self._stamp = self._fingerprint()
        self._set = load_policies(folder, require_shared=require_shared, cache=cache)
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
            reloaded = load_policies(
                self.folder, require_shared=self.require_shared, cache=self.cache
            )
        except PolicyError as exc:
            log.error("policy reload failed; keeping the last good policies", error=str(exc))
            return
        self.refused = weakenings(self._set, reloaded)
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


def weakenings(old: PolicySet, new: PolicySet) -> list[PolicyError]:
    """What a reload from ``old`` to ``new`` would take away from the guard, each naming the
    file and key that did it and the members it touches (empty: the reload may apply)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for member_id, before in old.members.items():
        after = new.members.get(member_id)
        if after is not None:  # a member removed is unknown from now on: rejected, not weaker
            for where, key, what in _guarded_checks(old, new, before, after):
                found.setdefault((where, key, what), []).append(after.id)
    merged = [
        PolicyError(where, key, f"the reload would {what} of {', '.join(members)}; {_RESTART}")
        for (where, key, what), members in found.items()
    ]
    return merged + _new_owners(old, new)


def _strongest(member: MemberPolicy, old: PolicySet) -> dict[str, int]:
    """The shared and boundary checks of ``member`` with the strongest ``on_fail`` of each."""
    found: dict[str, int] = {}
    for entry in member.checks:
        if entry.check in old.shared or entry.stage is Stage.BOUNDARY:
            # A check put in shadow blocks nothing any more: as soft as a warning.
            on_fail = OnFail.WARN if entry.shadow else entry.on_fail
            found[entry.check] = max(found.get(entry.check, 0), _STRENGTH[on_fail])
    return found


def _guarded_checks(
    old: PolicySet, new: PolicySet, before: MemberPolicy, after: MemberPolicy
) -> list[tuple[str, str, str]]:
    """(file, key, what) for each shared or boundary check of one member dropped or softened."""
    was, now = _strongest(before, old), _strongest(after, old)
    found = []
    for check, strength in sorted(was.items()):
        kind = "shared" if check in old.shared else "boundary"
        if check not in now:
            where, key = _where_dropped(old, new, after, check)
            found.append((where, key, f"drop the {kind} check {check!r}"))
        elif now[check] < strength:
            own = check in after.disabled  # the member's own entry replaced the shared one
            where = after.source if own else new.shared.get(check, after.source)
            found.append((where, "checks", f"soften the {kind} check {check!r}"))
    return found


def _where_dropped(
    old: PolicySet, new: PolicySet, after: MemberPolicy, check: str
) -> tuple[str, str]:
    """The file and key that dropped ``check``: the member's ``disable``, the shared file, or
    the member's own checks."""
    if check in new.shared:
        return after.source, "disable"
    return old.shared.get(check, after.source), "checks"


def _new_owners(old: PolicySet, new: PolicySet) -> list[PolicyError]:
    found = []
    for member in new.members.values():
        for tool in member.tools:
            before = old.tool_owner(tool)
            if before is not None and before.id != member.id:
                message = f"the reload would give {tool!r} to {member.id} (it was {before.id}'s)"
                found.append(PolicyError(member.source, f"tools.{tool}", f"{message}; {_RESTART}"))
    return found
