"""Policy sets kept warm in the fork server, used by a child only while their files are unchanged.

A fresh process spends about 100 ms in :func:`lingyi.policy.load_policies`. The warm process
keeps the sets it loaded, keyed by (folder, ``require_shared``, ``cache``), each with the
:func:`fingerprint` taken *before* it read the files: every file under the folder (name, size,
mtime, ctime, inode: a stat pass, well under a millisecond for a policy folder) and the
folders on ``sys.path`` (a plugin installed since adds an entry point there). A child takes a
warm set only when the fingerprint it computes now is the same; otherwise it loads as a fresh
process would and reports the key (:data:`misses`) so the parent loads it after the call.

The loader asks :func:`lookup` first; in every process but a warm child (and the first call,
which records what to warm) no hook is installed and it answers None at once. Only absolute
folders are kept: a relative one depends on the caller's working directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lingyi.policy import PolicySet

Key = tuple[str, bool, bool]  # (folder, require_shared, cache), as load_policies takes them
Fingerprint = tuple[tuple[Any, ...], ...]
LIMIT = 8  # policy sets kept; the oldest goes first
# Assertions the parent verifies once per loaded set, zh and en, with no log, council, KB or
# any other outside service: the checks compile their patterns and build their term
# automata on first use (about 0.25 s), and a child should find them built.
SAMPLES = (
    ("fact", "庄子的逍遥游讲的是自由"),
    ("fact", "The knowledge base has an article on qigong"),
    ("communication", "灵通说v0.16审计已经完成"),
    ("communication", "LingFlow told me the audit is done"),
    ("fact", "基于数据趋势，灵通下周一会上线"),
    ("fact", "Based on the trend, it will ship on Monday; take 20 mg of melatonin"),
)

_hook: Callable[[Path, bool, bool], PolicySet | None] | None = None
_then: Callable[[Key], None] | None = None  # told of each new miss as it happens
misses: list[Key] = []  # loaded the slow way in this process: worth warming


def lookup(folder: Path, require_shared: bool, cache: bool) -> PolicySet | None:
    """A warm policy set for these arguments, or None: load as usual."""
    return None if _hook is None else _hook(folder, require_shared, cache)


def record(then: Callable[[Key], None] | None = None) -> None:
    """Remember every load of this process in :data:`misses` (the first, in-process call);
    ``then`` is told of each as it happens (a ``serve`` runs for hours: it cannot wait for
    the end of the call to say what it loaded)."""
    global _hook, _then
    _hook, _then = _miss, then


def _miss(folder: Path, require_shared: bool, cache: bool) -> None:
    if folder.is_absolute():
        key = (str(folder), require_shared, cache)
        if key not in misses:
            misses.append(key)
            if _then is not None:
                _then(key)


def fingerprint(folder: Path) -> Fingerprint:
    """What a policy set loaded from ``folder`` depends on, from a stat pass."""
    found: list[tuple[Any, ...]] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.append(("dir", root, _stamp(root)))
        found += [("file", name, _stamp(os.path.join(root, name))) for name in sorted(files)]
    found += [("path", entry, _stamp(entry)) for entry in sys.path if entry]
    return tuple(found)


def _stamp(path: str) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class Warm:
    """The parent's policy sets and what it was asked to warm."""

    def __init__(self) -> None:
        self.sets: dict[Key, tuple[Fingerprint, PolicySet]] = {}
        self.wanted: list[Key] = []

    def want(self, key: Key) -> None:
        """Load ``key`` when the parent is idle (a child loaded it the slow way)."""
        if key not in self.wanted:
            self.wanted.append(key)

    def load_next(self) -> None:
        """Load one wanted set in the parent; a folder that does not load is left out."""
        from lingyi.errors import LingyiError
        from lingyi.policy._load import load_policies

        folder, require_shared, cache = key = self.wanted.pop(0)
        stamp = fingerprint(Path(folder))  # before reading: a change meanwhile is seen later
        try:
            loaded = load_policies(Path(folder), require_shared=require_shared, cache=cache)
        except (LingyiError, OSError, ValueError):
            self.sets.pop(key, None)  # a fresh load reports the problem, as it would anyway
            return
        exercise(loaded)
        self.sets.pop(key, None)
        self.sets[key] = (stamp, loaded)
        while len(self.sets) > LIMIT:
            del self.sets[next(iter(self.sets))]

    def serve(self, then: Callable[[Key], None] | None = None) -> None:
        """In a child: hand out the warm sets that still match, record the others (and
        tell ``then`` of each)."""
        global _hook, _then
        misses.clear()
        _hook, _then = self._lookup, then

    def _lookup(self, folder: Path, require_shared: bool, cache: bool) -> PolicySet | None:
        key = (str(folder), require_shared, cache)
        held = self.sets.get(key)
        if held is not None and held[0] == fingerprint(folder):
            return held[1]
        _miss(folder, require_shared, cache)
        return None


def exercise(loaded: PolicySet) -> None:
    """Verify :data:`SAMPLES` for each member against a throw-away layer (nothing logged,
    nothing opened), so that what the checks build lazily is built in the parent."""
    from lingyi.council import MemoryCouncil
    from lingyi.layer import ConstraintLayer
    from lingyi.ledger import Ledger
    from lingyi.models import Assertion

    for language in ("zh", "en"):
        layer = ConstraintLayer(loaded, MemoryCouncil(), language=language)
        for member in loaded.members:
            for kind, content in SAMPLES:
                try:
                    given = {"member": member, "type": kind, "content": content}
                    layer.verify(Assertion.model_validate(given), Ledger())
                except Exception:  # a sample a policy cannot take costs nothing but its warmth
                    continue
