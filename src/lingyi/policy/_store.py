"""The current policy set, reloaded when a policy file changes.

A reload that fails keeps the last good set (the guard must not switch off because someone
saved a typo), and so does a reload that validates but would weaken the guard while it runs:
drop a shared check or a boundary check from a member, narrow the inputs either runs on (its
``types`` or ``tools``), soften either's ``on_fail``, take a judge rule away or soften it, loosen
a scored signal's threshold (:mod:`._judge_weakening`), or hand a tool to another member. Each
is logged with the file and key; a restart applies such a change on purpose (start-up has
nothing to compare against, and every rule of the loader holds).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lingyi._logging import get_logger
from lingyi.errors import PolicyError
from lingyi.models import AssertionType, OnFail, Stage
from lingyi.policy._judge_weakening import STRENGTH as _STRENGTH
from lingyi.policy._judge_weakening import Case, cases, judge_weakenings
from lingyi.policy._load import ignored_reason, load_policies
from lingyi.policy._model import MemberPolicy, PolicySet

log = get_logger()

_RESTART = "refused: the last good policies stay (restart the server to apply it on purpose)"


class PolicyStore:
    """The current policy set, reloaded when a file in the folder changes."""

    def __init__(
        self,
        folder: Path,
        *,
        check_interval_s: float = 1.0,
        require_shared: bool = True,
        judge_on_fail: OnFail = OnFail.REJECT,
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


def weakenings(
    old: PolicySet, new: PolicySet, *, judge_on_fail: OnFail = OnFail.REJECT
) -> list[PolicyError]:
    """What a reload from ``old`` to ``new`` would take away from the guard, each naming the
    file and key that did it and the members it touches (empty: the reload may apply)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for member_id, before in old.members.items():
        after = new.members.get(member_id)
        if after is None:  # a member removed is unknown from now on: rejected, not weaker
            continue
        checks = _guarded_checks(old, new, before, after)
        for where, key, what in checks + judge_weakenings(before, after, judge_on_fail):
            found.setdefault((where, key, what), []).append(after.id)
    merged = [
        PolicyError(where, key, f"the reload would {what} of {', '.join(members)}; {_RESTART}")
        for (where, key, what), members in found.items()
    ]
    return merged + _new_owners(old, new)


def _strongest(
    member: MemberPolicy, old: PolicySet, inputs: list[Case]
) -> dict[str, dict[Case, int]]:
    """The shared and boundary checks of ``member``: for each, the inputs (type and tool) it
    runs on, with the strongest ``on_fail`` of its entries on each (a check may have several
    entries, e.g. ``pre.content`` with one length for answers and one for the rest)."""
    found: dict[str, dict[Case, int]] = {}
    for entry in member.checks:
        if entry.check in old.shared or entry.stage is Stage.BOUNDARY:
            # A check put in shadow blocks nothing any more: as soft as a warning.
            strength = _STRENGTH[OnFail.WARN if entry.shadow else entry.on_fail]
            cases = found.setdefault(entry.check, {})
            for case in inputs:
                if entry.applies(*case):
                    cases[case] = max(cases.get(case, 0), strength)
    return found


def _guarded_checks(
    old: PolicySet, new: PolicySet, before: MemberPolicy, after: MemberPolicy
) -> list[tuple[str, str, str]]:
    """(file, key, what) for each shared or boundary check of one member dropped, narrowed
    (no longer run on some type or tool it ran on) or softened."""
    inputs = cases(before, after)
    was, now = _strongest(before, old, inputs), _strongest(after, old, inputs)
    found = []
    for check, ran in sorted(was.items()):
        kind = "shared" if check in old.shared else "boundary"
        left = now.get(check, {})
        own = check in after.disabled  # the member's own entry replaced the shared one
        where = after.source if own else new.shared.get(check, after.source)
        if not left:
            where, key = _where_dropped(old, new, after, check)
            found.append((where, key, f"drop the {kind} check {check!r}"))
        elif lost := [case for case in ran if case not in left]:
            found.append((where, "checks", f"narrow the {kind} check {check!r} ({_lost(lost)})"))
        elif any(left[case] < strength for case, strength in ran.items()):
            found.append((where, "checks", f"soften the {kind} check {check!r}"))
    return found


def _lost(lost: list[Case]) -> str:
    """The inputs a narrowed check no longer runs on, by type (with the tools when only some
    calls of that type are lost), in the order of the types."""
    parts = []
    for type_ in AssertionType:
        tools = [tool for t, tool in lost if t is type_]
        if tools:
            calls = ", ".join(tool for tool in tools if tool is not None)
            parts.append(f"{type_.value} ({calls})" if None not in tools and calls else type_.value)
    return "no longer on " + "; ".join(parts)


def _where_dropped(
    old: PolicySet, new: PolicySet, after: MemberPolicy, check: str
) -> tuple[str, str]:
    """The file and key that dropped ``check``: the member's ``disable``, the shared file (its
    entries gone, or narrowed to inputs this member never sends), or the member's own checks."""
    if check in after.disabled:
        return after.source, "disable"
    return new.shared.get(check) or old.shared.get(check, after.source), "checks"


def _new_owners(old: PolicySet, new: PolicySet) -> list[PolicyError]:
    found = []
    for member in new.members.values():
        for tool in member.tools:
            before = old.tool_owner(tool)
            if before is not None and before.id != member.id:
                message = f"the reload would give {tool!r} to {member.id} (it was {before.id}'s)"
                found.append(PolicyError(member.source, f"tools.{tool}", f"{message}; {_RESTART}"))
    return found
