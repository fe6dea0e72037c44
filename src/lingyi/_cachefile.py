"""Files lingyi keeps in the user's cache to start faster: where, who may write them, how.

Shared by the policy parse cache (:mod:`lingyi.policy._cache`) and the canonical forms of
lexicon terms (:mod:`lingyi.text._forms`). What such a file holds decides what the guard
matches, so it is read only when it is the user's own: on POSIX, owned by the current user
and neither it nor its folder writable by group or others (a folder lingyi makes is 0700).
Windows has no owner to compare; the user's profile folder is private to the user there.
Files are plain JSON (never pickle), replaced atomically, and a failure to read one means
working without it.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from lingyi._logging import get_logger

log = get_logger()


def user_cache(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/lingyi/...``, else ``~/.cache/lingyi/...`` (as the KB's index)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root, "lingyi", *parts)


def private(path: Path) -> bool:
    """Is ``path`` (and its folder) the current user's alone to write?"""
    if not hasattr(os, "getuid"):
        return True
    for where in (path, path.parent):
        st = os.stat(where)
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def read_private(path: Path, key: str) -> dict[str, Any]:
    """The ``entries`` of the JSON cache file at ``path`` when it is private and made under
    ``key`` (format and versions); empty when missing, foreign, corrupt or others' to write."""
    try:
        if not private(path):
            log.warning("cache file ignored: writable by others", path=str(path))
            return {}
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):  # missing, unreadable or not JSON: work without it
        return {}
    if not isinstance(data, dict) or data.get("key") != key:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def write_private(path: Path, key: str, entries: dict[str, Any]) -> None:
    """Replace ``path`` atomically, in a folder only the user may enter (0700); a failure
    is logged, never raised (the next start parses again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".lingyi-", suffix=".tmp")
    except OSError as exc:
        log.info("cache not written", path=str(path), error=str(exc))
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"key": key, "entries": entries}, out, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        log.info("cache not written", path=str(path), error=str(exc))
